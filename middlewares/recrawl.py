"""Track every fetch for recrawl, and make refetches conditional.

On when ``CRAWL_RECRAWL_TRACK`` is set or the spider runs ``-a mode=continuous``
(and the frontier is the scheduler: the state lives in its Redis).

* :class:`RecrawlSpiderMiddleware` (spider middleware, order 30: after the
  duplicate filter at 500 has put its verdict and SimHash in the fetch record)
  turns each response's fetch record into a :class:`FetchOutcome`, computes the
  URL's next state and due time with the previous state the request carries
  (``meta["crawl_recrawl"]``, put there by the promotion script), and hands it
  to the frontier, which writes it before the URL's ack. A 304 keeps the
  previous digest (the page did not change); a duplicate page is forgotten
  (its original is tracked). Stats ``recrawl/verdict/<verdict>``,
  ``recrawl/not_modified``; ``web``'s fetch record gains ``recrawl`` (the
  verdict), a spider's own items nothing (the verdict is read from the response).
* :class:`RecrawlDownloaderMiddleware` (order 20) adds ``If-None-Match`` /
  ``If-Modified-Since`` from the state a refetch carries
  (``recrawl/conditional_requests``), and records a fetch that failed for good
  without an answer (it sees only final failures: RetryMiddleware, at 550,
  turns the others into retries first).
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter, is_item
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from crawlproject.body_digest import body_sha1
from crawlproject.component_off import switched_off
from crawlproject.dedupe.verdict import FETCH_RECORDS_ATTR, VERDICT_META_KEY, PageVerdict
from crawlproject.frontier.scrapy_glue.frontier_lookup import frontier_of, require_frontier
from crawlproject.recrawl.config import (
    CHANGEFREQ_META_KEY,
    LASTMOD_META_KEY,
    STATE_META_KEY,
    RecrawlConfig,
)
from crawlproject.recrawl.schedule import (
    FetchOutcome,
    FetchState,
    StateDecodeError,
    Verdict,
    decode_state,
    encode_state,
    next_state,
)
from crawlproject.store.config import RESPONSE_ITEM_KEY

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

DIGEST_HEX_CHARS = 16  # the state keeps the first 8 bytes of the body's SHA-1


def tracking_enabled(crawler: Crawler, config: RecrawlConfig) -> bool:
    return config.track or bool(getattr(crawler.spider, "continuous", False))


def previous_state(request: Request | None, stats: StatsCollector) -> FetchState | None:
    if request is None:
        return None
    text = request.meta.get(STATE_META_KEY)
    if not isinstance(text, str):
        return None
    try:
        return decode_state(text)
    except StateDecodeError as exc:
        stats.inc_value("recrawl/bad_state")
        logger.warning("Ignoring a malformed recrawl state of %s: %s", request.url, exc)
        return None


class _Tracker:
    def __init__(self, crawler: Crawler, config: RecrawlConfig, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        config = RecrawlConfig.from_settings(crawler.settings)
        if not tracking_enabled(crawler, config):
            why = "CRAWL_RECRAWL_TRACK is off and the crawl is not continuous"
            raise switched_off(cls, crawler.settings, why, "CRAWL_RECRAWL_TRACK")
        require_frontier(crawler)
        assert crawler.stats is not None
        return cls(crawler, config, crawler.stats)

    def record(
        self, prev: FetchState | None, outcome: FetchOutcome, forget: bool = False
    ) -> Verdict:
        state, verdict = next_state(prev, outcome, self.config)
        if forget:
            state = None
        try:
            text = encode_state(state) if state is not None else None
        except ValueError as exc:  # a URL with a TAB, ...: cannot be stored
            self.stats.inc_value("recrawl/untrackable")
            logger.debug("Not tracking %s: %s", outcome.url, exc)
            return verdict
        frontier_of(self.crawler).track_fetch(
            outcome.url, text, state.due_s() if state is not None else 0
        )
        self.stats.inc_value(f"recrawl/verdict/{verdict.value}")
        if state is None:
            self.stats.inc_value("recrawl/forgotten")
        return verdict


class RecrawlSpiderMiddleware(_Tracker):
    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        recorded = False
        async for obj in result:
            if not recorded and is_item(obj) and "url" in ItemAdapter(obj):
                recorded = True
                self._record_response(response, ItemAdapter(obj))
            yield obj

    def _record_response(self, response: Response, item: ItemAdapter) -> None:
        request = response.request
        status = response.status
        ok = 200 <= status < 300
        if status == 304:
            self.stats.inc_value("recrawl/not_modified")
        meta = request.meta if request is not None else {}
        # The duplicate filter's verdict is the response's (crawlproject/dedupe/
        # verdict.py), never read from, nor written into, a spider's own items.
        found = response.meta.get(VERDICT_META_KEY)
        page = found if isinstance(found, PageVerdict) else None
        outcome = FetchOutcome(
            url=str(item.get("url") or response.url),
            depth=int(meta.get("depth", 0) or 0),
            fetched_at_s=int(time.time()),
            status=status,
            digest=body_sha1(response).hex()[:DIGEST_HEX_CHARS] if ok else "",
            simhash=str(page.record_fields().get("simhash", "")) if page else "",
            etag=_header(response, b"ETag"),
            last_modified=_header(response, b"Last-Modified"),
            sitemap_changefreq=str(meta.get(CHANGEFREQ_META_KEY) or ""),
            sitemap_lastmod_s=_lastmod_s(meta.get(LASTMOD_META_KEY)),
        )
        # A duplicate of another page is not tracked: its original is.
        duplicate = page is not None and page.kind is not None
        verdict = self.record(previous_state(request, self.stats), outcome, forget=duplicate)
        if not getattr(self.crawler.spider, FETCH_RECORDS_ATTR, False):
            return  # a spider's own item: tracked, never given a field
        # An item class without the field: the stat still counts it.
        with contextlib.suppress(KeyError):
            item["recrawl"] = verdict.value
        if status == 304 and item.get("not_modified") and _stores_bodies(self.crawler):
            # The web spider's record of a 304 goes to the storage pipeline with
            # its answer, which it archives as a revisit (crawlproject/store/
            # revisit_choice.py) and takes out again, as for a page.
            item[RESPONSE_ITEM_KEY] = response


class RecrawlDownloaderMiddleware(_Tracker):
    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        state = previous_state(request, self.stats)
        # Redirect hops copy meta: validators belong to the URL they came from.
        if state is None or state.url != request.url:
            return
        added = False
        if state.etag and b"If-None-Match" not in request.headers:
            request.headers[b"If-None-Match"] = state.etag
            added = True
        if state.last_modified and b"If-Modified-Since" not in request.headers:
            request.headers[b"If-Modified-Since"] = state.last_modified
            added = True
        if added:
            self.stats.inc_value("recrawl/conditional_requests")

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        if isinstance(exception, IgnoreRequest):
            return  # not fetched (robots.txt forbids it, a trap guard, ...)
        redirected_from = request.meta.get("redirect_urls") or ()
        outcome = FetchOutcome(
            url=redirected_from[0] if redirected_from else request.url,
            depth=int(request.meta.get("depth", 0) or 0),
            fetched_at_s=int(time.time()),
            status=None,
        )
        self.record(previous_state(request, self.stats), outcome)


def _stores_bodies(crawler: Crawler) -> bool:
    return bool(getattr(crawler.spider, "store_bodies", False))


def _header(response: Response, name: bytes) -> str:
    value = response.headers.get(name)
    return value.decode("latin-1").strip() if value else ""


def _lastmod_s(value: object) -> int | None:
    """A sitemap <lastmod> (W3C datetime or date) as unix seconds, or None."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())
