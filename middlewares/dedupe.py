"""Decide, per fetched page, whether the fleet has seen it (or nearly) before.

A spider middleware, because the decision must come before the page's links
go to the frontier: the links of a duplicate are not followed (its original's
were), unless ``CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS``. For the first item a
callback yields for a response it:

1. takes the SHA-1 of the body (exact duplicates) and, for HTML with enough
   visible text, a 64-bit SimHash of that text (crawlproject/dedupe/fingerprint.py);
2. asks the fleet's index in Redis, in one atomic call that also records the
   page when it is new (crawlproject/dedupe/index.py), so two workers fetching
   two copies at the same moment keep exactly one;
3. writes the outcome into the item (``content_sha1``, ``simhash``, and for a
   duplicate ``dedupe``, ``duplicate_of``, ``dedupe_distance``), where the item
   pipeline (pipelines/dedupe.py) drops it;
4. when a host's pages have been duplicates ``CRAWL_DEDUPE_STREAK`` times in
   a row (soft-404 and session-id traps look like that), sets the host's queued
   URLs aside in the frontier (``parked``; kept, not deleted).

Callbacks should yield a page's item before its links (the ``web`` spider does);
links yielded before the item are followed whatever the verdict.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter, is_item
from redis.exceptions import RedisError
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import Response, TextResponse

from crawlproject.dedupe.config import DedupeConfig
from crawlproject.dedupe.fingerprint import text_fingerprint, visible_text, visible_text_of_tree
from crawlproject.dedupe.index import DedupeBatcher, DedupeIndex, DedupeKind, DedupeVerdict
from crawlproject.frontier.scheduler import FrontierScheduler, frontier_of, require_frontier
from crawlproject.frontier.urls import InvalidURL

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

SIMHASH_HEX_CHARS = 16


class DedupeSpiderMiddleware:
    def __init__(self, crawler: Crawler, config: DedupeConfig, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self._index: DedupeBatcher | None = None
        self._parked_hosts: set[str] = set()
        self._unannotatable_logged = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DedupeSpiderMiddleware:
        config = DedupeConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured("CRAWL_DEDUPE_ENABLED is off")
        require_frontier(crawler)  # the index lives in the frontier's Redis
        assert crawler.stats is not None
        return cls(crawler, config, crawler.stats)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        verdict: DedupeVerdict | None = None
        async for obj in result:
            # Only a 2xx page is judged: an error page's record (the spider's
            # errback) must not enter the index as an original.
            if verdict is None and is_item(obj) and 200 <= response.status < 300:
                verdict = await self._judge(response, obj)
            elif (
                isinstance(obj, Request)
                and verdict is not None
                and verdict.kind is not DedupeKind.NEW
                and not self.config.follow_duplicate_links
            ):
                self.stats.inc_value("dedupe/links_not_followed")
                continue
            yield obj

    # -- the verdict ---------------------------------------------------------------

    async def _judge(self, response: Response, item: Any) -> DedupeVerdict | None:
        adapter = ItemAdapter(item)
        digest = hashlib.sha1(response.body).digest()
        simhash = self._simhash(response)
        try:
            verdict = await self._index_of().check_and_add(
                digest, simhash, response.url, self._host(response.url)
            )
        except RedisError as exc:
            # Keep the page: losing a page is worse than storing a copy.
            self.stats.inc_value("dedupe/redis_error")
            logger.warning("Duplicate check of %s failed (%s): page kept", response.url, exc)
            return None
        if verdict.kind is not DedupeKind.NEW and verdict.original == response.url:
            # Its own earlier fetch: a worker that judged it died before the page
            # was stored (its lease brought the URL back), or a recrawl. Not a
            # copy of another page: keep it. (Needs CRAWL_DEDUPE_RECORD_ORIGINALS.)
            self.stats.inc_value("dedupe/same_url_again")
            verdict = DedupeVerdict(DedupeKind.NEW, None, None, 0)
        self.stats.inc_value(f"dedupe/checked/{verdict.kind.value}")
        try:
            adapter["content_sha1"] = digest.hex()
            if simhash is not None:
                adapter["simhash"] = f"{simhash:0{SIMHASH_HEX_CHARS}x}"
            if verdict.kind is not DedupeKind.NEW:
                adapter["dedupe"] = verdict.kind.value
                adapter["duplicate_of"] = verdict.original
                adapter["dedupe_distance"] = verdict.distance
        except KeyError:
            if not self._unannotatable_logged:
                self._unannotatable_logged = True
                logger.warning(
                    "Items of type %s have no dedupe fields: duplicates are not dropped",
                    type(item).__name__,
                )
            return None
        if verdict.kind is not DedupeKind.NEW:
            logger.debug(
                "%s duplicate (distance %s): %s of %s",
                verdict.kind.value,
                verdict.distance,
                response.url,
                verdict.original or "an earlier page",
            )
            await self._check_streak(response.url, verdict)
        return verdict

    def _simhash(self, response: Response) -> int | None:
        if not isinstance(response, TextResponse):
            return None
        ctype = (response.headers.get(b"Content-Type") or b"").decode("latin-1").lower()
        if ctype.split(";", 1)[0].strip() not in self.config.content_types:
            return None
        try:
            # The tree the spider parsed (for its links) already: no second parse.
            text = visible_text_of_tree(response.selector.root)
        except (AttributeError, ValueError, TypeError):
            text = visible_text(response.text)
        simhash, text_chars = text_fingerprint(text)
        if text_chars < self.config.min_text_chars:
            self.stats.inc_value("dedupe/short_text")
            return None
        return simhash

    async def _check_streak(self, url: str, verdict: DedupeVerdict) -> None:
        if not self.config.streak or verdict.host_streak < self.config.streak:
            return
        host = self._host(url)
        if self.config.streak_action == "off":
            if host not in self._parked_hosts:
                self._parked_hosts.add(host)
                logger.info("%s: %d duplicate pages in a row", host, verdict.host_streak)
            return
        frontier = self._scheduler().frontier
        assert frontier is not None
        parked = await frontier.park_host(host)
        self.stats.inc_value("dedupe/streak_parked_urls", parked)
        if host not in self._parked_hosts:
            self._parked_hosts.add(host)
            self.stats.inc_value("dedupe/streak_hosts")
            logger.info(
                "%s: %d duplicate pages in a row (a trap?): %d queued URL(s) set aside",
                host,
                verdict.host_streak,
                parked,
            )

    # -- plumbing ------------------------------------------------------------------

    def _scheduler(self) -> FrontierScheduler:
        return frontier_of(self.crawler)

    def _host(self, url: str) -> str:
        try:
            return self._scheduler().politeness_key(url)
        except InvalidURL:
            return ""

    def _index_of(self) -> DedupeBatcher:
        if self._index is None:
            frontier = self._scheduler().frontier
            assert frontier is not None, "the frontier opens before any response"
            index = DedupeIndex(
                frontier.redis,
                frontier.keys,
                k=self.config.k,
                record_originals=self.config.record_originals,
            )
            self._index = DedupeBatcher(index)
        return self._index
