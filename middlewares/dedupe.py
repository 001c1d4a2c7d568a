"""Decide, per fetched page, whether the fleet has seen it (or nearly) before.

A spider middleware, because the decision must come before the page's links
go to the frontier. A verdict belongs to the response, never to an item
(crawlproject/dedupe/verdict.py). At the first item a callback yields for a
2xx response it:

1. takes the SHA-1 of the body (exact duplicates) and, for HTML, a 64-bit
   SimHash of the visible text (crawlproject/dedupe/fingerprint.py);
2. if the host is a known soft-404 space (crawlproject/dedupe/soft404.py) and
   the page is its not-found page (same body, or SimHash within k), marks it a
   near duplicate of the host's probe: not indexed (``trap/soft404``);
3. else asks the fleet's index in Redis, in one atomic call that also records
   the page when it is new (crawlproject/dedupe/index.py), so two workers
   fetching two copies at the same moment keep exactly one (only pages with
   ``CRAWL_DEDUPE_MIN_TEXT_CHARS`` of text get the near test);
4. keeps the verdict in ``response.meta`` (``crawl_dedupe``); no item gains a
   field, but ``web`` (``fetch_records = True``) has its own fetch record get the
   verdict's fields, and pipelines/dedupe.py drops a copy's record;
5. drops all the items of an exact copy of any other spider,
   ``CRAWL_DEDUPE_DROP_ITEMS`` permitting (``dedupe/items_dropped``, said once
   at INFO; the response one carries for the store is still archived:
   crawlproject/store/signals.py); a near copy's are all kept, as new content;
6. decides about the page's links (``CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS``): a
   near copy's (listings under one long template are near copies, each linking
   pages no other does; for ``web`` at most NEAR_COPY_HOPS along a chain,
   ``dedupe/near_hops_exceeded``, never for another spider, and not counting a
   page with text its host never showed, ``dedupe/near_new_text``:
   crawlproject/dedupe/new_text.py) and a mirror's copy's
   follow the originals' (``dedupe/links_followed_lower``, ``dedupe/mirror_copies``);
   an exact copy's of its own host (the same links) and a soft 404's are dropped
   (``dedupe/links_not_followed``);
7. when a host's pages have been duplicates ``CRAWL_DEDUPE_STREAK`` times in
   a row (soft-404 and session-id traps look like that), sets the host's queued
   URLs aside in the frontier (``parked``; kept, not deleted); a mirror's copy
   (original on another host) never triggers it;
8. the first time the fleet meets a suspect page of a host (a near duplicate of
   a page of its own host, or one whose text shows its own path), one worker
   queues the host's soft-404 probe (``trap/soft404_probes``); only the host's
   verdict leaves this middleware (``trap/soft404_hosts`` when it answered 2xx);
9. marks each link with the depth guard's count (frontier/admission/depth_chains.py: a copy of
   a page of its own host, or a thin page, brought nothing new:
   ``dedupe/stale_pages``); for a page with a token shape, tells the token guard
   what it showed (frontier/admission/token_evidence.py, ``trap/token_pages``).

Callbacks should yield a page's item before its links (the ``web`` spider does);
links yielded before the first item are followed whatever the verdict.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from itemadapter import is_item
from redis.exceptions import RedisError
from scrapy import Request, Spider, signals
from scrapy.http import Response

from crawlproject.body_digest import body_sha1
from crawlproject.component_off import switched_off
from crawlproject.dedupe.batcher import DedupeBatcher
from crawlproject.dedupe.config import DedupeConfig
from crawlproject.dedupe.index import DedupeIndex, DedupeKind, DedupeMismatch, DedupeVerdict
from crawlproject.dedupe.new_text import NEW_TEXT_SHINGLES, HostText
from crawlproject.dedupe.page_text import NO_TEXT, Text, page_text
from crawlproject.dedupe.probes import Soft404Probes
from crawlproject.dedupe.soft404 import PROBE_META_KEY, NotFoundPage, echoes_path
from crawlproject.dedupe.streaks import DuplicateStreaks, Parking
from crawlproject.dedupe.verdict import (
    EXACT,
    FETCH_RECORDS_ATTR,
    NEAR,
    NEAR_HOPS_META_KEY,
    VERDICT_META_KEY,
    ItemsDropped,
    Links,
    Outcome,
    PageVerdict,
    annotate,
    duplicate_links,
    near_hops,
)
from crawlproject.frontier.admission.depth_chains import mark_link
from crawlproject.frontier.admission.priority import (
    CREDIT_MODE,
    CREDIT_WEIGHT_META_KEY,
    policy_class,
)
from crawlproject.frontier.admission.token_evidence import (
    TokenEvidence,
    TokenPage,
    same_shape,
    token_page,
)
from crawlproject.frontier.basics.outcomes import FRONTIER_UNAVAILABLE
from crawlproject.frontier.basics.urls import InvalidURL
from crawlproject.frontier.scrapy_glue.frontier_lookup import (
    crawl_redis_of,
    frontier_of,
    require_frontier,
)
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from crawlproject.setting_values import crawl_setting
from crawlproject.store.signals import archive_dropped_item

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# The links of a duplicate that are followed (a near copy's, a mirror's copy's):
# queued this many bands after those of an original at the same depth (score
# mode), or with this fraction of their credit share (AOPIC), so that the
# originals' own links go first.
LINK_BAND_PENALTY = 4
LINK_CREDIT_WEIGHT = 0.25


class DedupeSpiderMiddleware:
    def __init__(
        self,
        crawler: Crawler,
        config: DedupeConfig,
        stats: StatsCollector,
        probe: bool,
        credit_mode: bool = False,
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self.probes = Soft404Probes(crawler, stats, enabled=probe)  # CRAWL_SOFT404_PROBE
        self.credit_mode = credit_mode  # AOPIC: lower a link's credit, not its band
        self._index: DedupeBatcher | None = None
        self._streaks = DuplicateStreaks(config, stats, self._parking)
        self._unannotatable_logged = False
        self._dropped = ItemsDropped(stats)
        self._closing: asyncio.Future[None] | None = None
        self._evidence: TokenEvidence | None = None
        self._host_text = HostText()  # web's near copies' new text

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DedupeSpiderMiddleware:
        config = DedupeConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise switched_off(
                cls, crawler.settings, "CRAWL_DEDUPE_ENABLED is off", "CRAWL_DEDUPE_ENABLED"
            )
        require_frontier(crawler)  # the index lives in the frontier's Redis
        assert crawler.stats is not None
        probe = bool(crawl_setting(crawler.settings, "CRAWL_SOFT404_PROBE"))
        policy = policy_class(crawl_setting(crawler.settings, "CRAWL_PRIORITY_POLICY"))
        credit_mode = getattr(policy, "mode", None) == CREDIT_MODE
        middleware = cls(crawler, config, crawler.stats, probe, credit_mode)
        crawler.signals.connect(middleware.spider_opened, signals.spider_opened)
        return middleware

    async def spider_opened(self, spider: Spider) -> None:
        """Refuses the worker at its start, in one line, when the crawl's index was
        created with another k or SimHash features version: its every check would
        be refused (each page kept unjudged), never misread. The spider closes as
        when the frontier cannot be opened (``frontier_unavailable``, exit 1)."""
        if crawl_redis_of(self.crawler) is None:
            return  # the frontier did not open: it says why and closes the spider
        try:
            await self._index_of().index.verify()
        except DedupeMismatch as exc:
            logger.error("Not crawling: %s", exc)
            self._closing = asyncio.ensure_future(self._close(FRONTIER_UNAVAILABLE))
        except RedisError as exc:  # each page's check still refuses a mismatch
            logger.warning("Dedupe index not checked at start (%s)", exc)

    async def _close(self, reason: str) -> None:
        # Not inside spider_opened: the engine finishes opening first.
        engine = self.crawler.engine
        if engine is not None:
            await engine.close_spider_async(reason=reason)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        if response.meta.get(PROBE_META_KEY):
            async for _ in result:
                pass  # a probe is no page: no record, no links, only the host's verdict
            await self._probe_answered(response)
            return
        outcome: Outcome | None = None
        admission = self._scheduler().admission
        page = token_page(admission, response.url)
        spawned = 0  # its links of its own host and token shape
        records = bool(getattr(self.crawler.spider, FETCH_RECORDS_ATTR, False))
        async for obj in result:
            if not isinstance(obj, Request) and is_item(obj):
                probe = None
                # Only a 2xx page is judged: an error page's record (the spider's
                # errback) must not enter the index as an original.
                if outcome is None and 200 <= response.status < 300:
                    outcome = await self._judge(response)
                    probe = outcome.probe
                    if records and outcome.verdict is not None:
                        self._annotate(obj, outcome.verdict)  # the spider's own record
                if outcome is not None and outcome.drop_items and not records:
                    self._dropped.dropped(response.url, outcome.verdict)
                    await archive_dropped_item(self.crawler, obj)  # its page stored all the same
                else:
                    yield obj
                if probe is not None:
                    yield probe
                continue
            if isinstance(obj, Request):
                mark_link(obj.meta, response.meta, outcome is None or outcome.novel)
                if page is not None and same_shape(admission, obj.url, page):
                    spawned += 1
            if isinstance(obj, Request) and outcome is not None:
                if outcome.links is Links.DROP:
                    self.stats.inc_value("dedupe/links_not_followed")
                    continue
                if outcome.near_hops and self._host(obj.url) == self._host(response.url):
                    obj.meta[NEAR_HOPS_META_KEY] = outcome.near_hops
                if outcome.links is Links.LOWER:
                    if self.credit_mode:
                        obj.meta[CREDIT_WEIGHT_META_KEY] = LINK_CREDIT_WEIGHT
                    else:
                        obj.priority -= LINK_BAND_PENALTY
                    self.stats.inc_value("dedupe/links_followed_lower")
            yield obj
        if page is not None:
            await self._token_evidence(page, outcome, spawned)

    # -- the verdict ---------------------------------------------------------------

    async def _judge(self, response: Response) -> Outcome:
        digest = body_sha1(response)  # hashed once per response: the store reuses it
        text = self._text(response)
        host = self._host(response.url)
        echo = text.simhash is not None and echoes_path(response.url, text.text)
        state = await self.probes.state(host, fresh=echo)
        if isinstance(state, NotFoundPage):
            distance = state.distance(digest.hex(), text.echoless(response.url))
            if distance is not None and distance <= self.config.k:
                return self._soft404(response, digest, text, state, distance)
        simhash = text.simhash
        thin = simhash is not None and text.chars < self.config.min_text_chars
        if thin:
            self.stats.inc_value("dedupe/short_text")
            simhash = None
        batcher = self._index_of()
        try:
            verdict = await batcher.check_and_add(digest, simhash, response.url, host)
        except RedisError as exc:
            # Keep the page: losing a page is worse than storing a copy.
            self.stats.inc_value("dedupe/redis_error")
            logger.warning("Duplicate check of %s failed (%s): page kept", response.url, exc)
            return Outcome(Links.FOLLOW)
        if verdict.same_url:
            # Its own earlier fetch (a recrawl, or its judge died after recording
            # it): no copy of another page. Kept; the index counted nothing, its
            # host's streak untouched. (Needs CRAWL_DEDUPE_RECORD_ORIGINALS.)
            self.stats.inc_value("dedupe/same_url_again")
            verdict = DedupeVerdict(DedupeKind.NEW, None, None, 0)
        elif verdict.unrecorded:  # its body's judge died before recording a URL: new
            self.stats.inc_value("dedupe/unrecorded_original")
        for what, calls in batcher.index.take_store_failures().items():
            # Verdicts kept; later near copies of these pages may be missed.
            self.stats.inc_value(f"dedupe/store_failed/{what}", calls)
        self.stats.inc_value(f"dedupe/checked/{verdict.kind.value}")
        kind = None if verdict.kind is DedupeKind.NEW else verdict.kind.value
        found = PageVerdict(digest.hex(), simhash, kind, verdict.original, verdict.distance)
        response.meta[VERDICT_META_KEY] = found
        mirror = (
            verdict.kind is not DedupeKind.NEW
            and verdict.original is not None
            and self._host(verdict.original) != host
        )
        # A copy of a page of its own host, or a thin page (too little text to be
        # content: an empty archive's), brought nothing new; a mirror's copy did,
        # a near copy another spider took items from (its operator's data), and
        # one with text its host never showed (a listing's page, new_text.py).
        near, web = verdict.kind is DedupeKind.NEAR, self._open_web()
        new_text = web and self._new_text(host, text, near, mirror)
        own_items = near and (new_text or not web)
        novel = mirror or own_items or (verdict.kind is DedupeKind.NEW and not thin)
        content = None if mirror or (thin and verdict.kind is DedupeKind.NEW) else novel
        if not novel:
            self.stats.inc_value("dedupe/stale_pages")
        links, hops = Links.FOLLOW, near_hops(response.meta)
        if verdict.kind is not DedupeKind.NEW:
            logger.debug(
                "%s duplicate (distance %s): %s of %s",
                verdict.kind.value,
                verdict.distance,
                response.url,
                verdict.original or "an earlier page",
            )
            follow = self.config.follow_duplicate_links
            links, hops, cut = duplicate_links(follow, near, mirror, web, own_items, hops)
            if cut:
                self.stats.inc_value("dedupe/near_hops_exceeded")
            if mirror:
                self.stats.inc_value("dedupe/mirror_copies")
            elif not own_items:
                await self._streaks.check(host, verdict.host_streak)
        # Not an exact copy: URL aliases (?a=1&b=2, index.html) are common and
        # harmless (their links are not followed); a soft 404 is near or echoes.
        suspect = echo or (verdict.kind is DedupeKind.NEAR and not mirror)
        probe = await self.probes.probe_for(response, host) if suspect and state is None else None
        drop = self.config.drop_items and kind == EXACT
        return Outcome(links, probe, novel, content, found, drop, hops)

    def _new_text(self, host: str, text: Text, near: bool, mirror: bool) -> bool:
        """Web's near copy of its own host shows text its host never showed (each
        judged page of a host with such copies feeds the host's memory)."""
        if text.simhash is None:
            return False
        new = self._host_text.new_shingles(host, text.text, watch=near and not mirror)
        if new is None or not near or mirror or new < NEW_TEXT_SHINGLES:
            return False
        self.stats.inc_value("dedupe/near_new_text")
        return True

    def _open_web(self) -> bool:
        """The spider follows every link and keeps fetch records (web): the
        guards of the open web apply to its duplicates' links in full."""
        return bool(getattr(self.crawler.spider, FETCH_RECORDS_ATTR, False))

    def _annotate(self, item: Any, verdict: PageVerdict) -> None:
        if not annotate(item, verdict) and not self._unannotatable_logged:
            self._unannotatable_logged = True
            logger.warning(
                "Fetch records of type %s have no dedupe fields: duplicates are not dropped",
                type(item).__name__,
            )

    def _text(self, response: Response) -> Text:
        return page_text(response, self.config.content_types)

    # -- soft-404 spaces -----------------------------------------------------------

    def _soft404(
        self, response: Response, digest: bytes, text: Text, page: NotFoundPage, distance: int
    ) -> Outcome:
        """A page of a soft-404 space: a near copy of the host's probe answer,
        kept out of the index (it is no page) and its links not followed."""
        self.stats.inc_value("trap/soft404")
        verdict = PageVerdict(digest.hex(), text.simhash, NEAR, page.url, distance)
        response.meta[VERDICT_META_KEY] = verdict
        logger.debug("Soft 404 (distance %d to %s): %s", distance, page.url, response.url)
        return Outcome(Links.DROP, novel=False, content=False, verdict=verdict)

    async def _probe_answered(self, response: Response) -> None:
        text = self._text(response) if 200 <= response.status < 300 else NO_TEXT
        await self.probes.answered(response, self._host(response.url), text.echoless(response.url))

    async def _token_evidence(self, page: TokenPage, outcome: Outcome | None, spawned: int) -> None:
        if self._evidence is None:
            shared = crawl_redis_of(self.crawler)
            assert shared is not None, "the frontier opens before any response"
            self._evidence = TokenEvidence(shared.redis, shared.keys)
        content = outcome.content if outcome is not None else None
        try:
            await self._evidence.record(page.pkey, page.shape, content, spawned)
        except RedisError as exc:  # the guard then judges the shape by its links alone
            self.stats.inc_value("dedupe/redis_error")
            logger.warning("Token evidence of %s not recorded (%s)", page.pkey, exc)
            return
        self.stats.inc_value("trap/token_pages")

    # -- plumbing ------------------------------------------------------------------

    def _scheduler(self) -> FrontierScheduler:
        return frontier_of(self.crawler)

    def _parking(self) -> Parking:
        frontier = self._scheduler().frontier
        assert frontier is not None, "the frontier opens before any response"
        return frontier

    def _host(self, url: str) -> str:
        try:
            return self._scheduler().politeness_key(url)
        except InvalidURL:
            return ""

    def _index_of(self) -> DedupeBatcher:
        if self._index is None:
            shared = crawl_redis_of(self.crawler)
            assert shared is not None, "the frontier opens before any response"
            index = DedupeIndex(
                shared.redis,
                shared.keys,
                k=self.config.k,
                record_originals=self.config.record_originals,
                blocks=self.config.near_blocks,
                parts=self.config.parts,
            )
            self._index = DedupeBatcher(index)
        return self._index
