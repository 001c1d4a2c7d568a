"""FrontierScheduler: Scrapy's scheduler slot, backed by the shared Redis frontier.

Why not scrapy-redis's Scheduler: its queue interface is a synchronous
``pop(timeout)`` that hands out whatever is queued (no per-host readiness, so
the greedy engine lets one worker drain the frontier), removes the request
for good (lost if the worker dies), and pickles requests. What fits is kept:
the ``REDIS_URL`` setting and the ``<crawl>:start_urls`` list convention.

Per worker, this class is Scrapy's interface and four loops; the state lives
in the parts it wires together:

* ``enqueue_request`` is synchronous and cheap: admission.py decides (rules,
  depth, recently seen, trap signals; JSON-encoded) and outbox.py queues; the
  *write* loop sends the outbox in batches, the seen test runs inside Redis.
* The *claim* loop keeps claims.py's small buffer of claimed requests, each
  for a host that is ready now, and wakes the engine (never hoarding).
* leases.py holds the leases: a host slot is released (the *release* loop)
  when the response or failure comes back; the lease is acknowledged only
  after the links the page produced are written, so a worker that dies at any
  point loses nothing: its leases expire and their URLs go back.
* The *maintenance* loop renews leases, reclaims expired ones (any worker's),
  reads seeds (seeds.py) and decides the crawl's end (crawl_end.py).

All Redis I/O is asyncio (redis.asyncio) on the reactor's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.defer import Deferred

from crawlproject.frontier.admission.admission import Admission, Refusal, SeenLocally
from crawlproject.frontier.admission.priority import CREDIT_MODE, PriorityPolicy, build_policy
from crawlproject.frontier.admission.seeds import SeedReader
from crawlproject.frontier.basics.outcomes import FRONTIER_ERROR, FRONTIER_UNAVAILABLE
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY, SEED_META_KEY
from crawlproject.frontier.basics.urls import UrlCanonicalizer
from crawlproject.frontier.claims.claim_clock import ClaimClock
from crawlproject.frontier.claims.claims import ClaimBuffer
from crawlproject.frontier.claims.leases import LeaseBook
from crawlproject.frontier.connection.cluster_check import warn_cluster_gaps
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.crawl.crawl_name import crawl_name_of
from crawlproject.frontier.crawl.crawl_redis import CrawlRedis, new_worker_id, open_frontier
from crawlproject.frontier.crawl.fresh_start import flush_on_start
from crawlproject.frontier.crawl.on_frontier import FrontierMark
from crawlproject.frontier.crawl.persist import end_crawl
from crawlproject.frontier.scrapy_glue.background_loops import (
    Backoff,
    close_or_exit,
    each_turn,
    wait_event,
    wait_or_leave,
)
from crawlproject.frontier.scrapy_glue.crawl_end import CrawlEnd
from crawlproject.frontier.scrapy_glue.engine_hooks import (
    check_engine,
    wake_engine,
    watch_request_ends,
)
from crawlproject.frontier.scrapy_glue.gc_tuning import tune_gc
from crawlproject.frontier.scrapy_glue.middleware_calls import MiddlewareCalls
from crawlproject.frontier.scrapy_glue.opening_lines import (
    OPEN_ERRORS,
    log_open_failure,
    log_opened,
    sources_line,
)
from crawlproject.frontier.scrapy_glue.scrapy_scheduling import checked_scheduling
from crawlproject.frontier.scrapy_glue.shutdown import hand_back, stop_loops
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.outbox import Outbox
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.frontier.store.seen_set import SeenWatch
from crawlproject.redis_calls import OUTAGE_ERRORS, outage_seconds
from crawlproject.rules.url_rules import UrlRules

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


logger = logging.getLogger("crawlproject.frontier.scheduler")  # the name operators grep for

MAINTENANCE_MAX_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 10.0

# Signal sent when the frontier scheduler starts closing, while its Redis is
# still open (no arguments). Connect with crawler.signals.connect(handler,
# signal=frontier_closing).
frontier_closing = object()


class FrontierScheduler(MiddlewareCalls, FrontierMark, BaseScheduler):
    def __init__(
        self,
        crawler: Crawler,
        config: FrontierConfig,
        stats: StatsCollector,
        rules: UrlRules,
        policy: PriorityPolicy,
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self.policy = policy
        self.worker_id = new_worker_id()
        self.outage_seconds = outage_seconds(crawler.settings)  # outage.py: one bound for all
        codec = RequestCodec(config.request_classes)
        self.seeds = SeedReader.from_crawler(crawler)  # its check refuses bad seeds in admission
        canonicalizer = UrlCanonicalizer(config.session_params)
        self.admission = Admission(config, rules, policy, canonicalizer, codec, self.seeds.check)
        self.outbox = Outbox(stats, policy.mode == CREDIT_MODE, self.outage_seconds)
        self.clock = ClaimClock()
        self.leases = LeaseBook(config, stats, self.outbox, self.clock)
        self.claims = ClaimBuffer(config, stats, codec, self.clock, self.leases, self.outbox)
        # Links known_link finished since the last write, counted into frontier/
        # seen_hits_local then: one stats call per write, not per link.
        self._known_hits = 0
        self.seen = SeenWatch(stats)  # the seen set's fill: stats, Bloom capacity warning
        self.end = CrawlEnd(config.idle_close_seconds, crawler)
        self.crawl_redis: CrawlRedis | None = None  # the crawl's Redis, once open
        self.frontier: RedisFrontier | None = None
        self._spider: Spider | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()  # loops end at their next turn; never cancelled mid-I/O
        self._open_failed = False
        self._closer: asyncio.Future[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        assert crawler.stats is not None
        config = FrontierConfig.from_settings(checked_scheduling(crawler.settings))
        return cls(
            crawler=crawler,
            config=config,
            stats=crawler.stats,
            rules=UrlRules.from_settings(crawler.settings),
            policy=build_policy(crawler, config.priority_policy),
        )

    @property
    def scope_roots(self) -> frozenset[str]:
        """The crawl's scope roots (sites of its seeds), as last seen."""
        return self.outbox.scope_roots

    # -- lifecycle ----------------------------------------------------------------

    def open(self, spider: Spider) -> Deferred[None]:
        return deferred_from_coro(self._open(spider))

    async def _open(self, spider: Spider) -> None:
        try:
            check_engine(self.crawler)  # before any connection: refuses a Scrapy without the hooks
            await self._connect(spider)
            # Every lease ends when the engine is done with its last request.
            watch_request_ends(self.crawler, self.leases.request_ended, self.outage_seconds)
        except OPEN_ERRORS as exc:
            log_open_failure(self.config, exc, self.crawler)  # the log's last line
            # Raising CloseSpider here would leave Scrapy's scraper unopened
            # (and its close failing noisily): let the engine finish opening,
            # then close the spider with a reason that says why.
            self._open_failed = True
            self.end.finished = True
            self.crawler.signals.connect(self._close_unavailable, signals.spider_opened)

    def _close_unavailable(self, spider: Spider) -> None:
        engine = self.crawler.engine
        if engine is not None:
            self._closer = asyncio.ensure_future(
                engine.close_spider_async(reason=FRONTIER_UNAVAILABLE)
            )

    async def _connect(self, spider: Spider) -> None:
        self._spider = spider
        c = self.config
        named = crawl_name_of(spider, self.crawler.settings)  # crawl_name.py: the one rule
        crawl = named.name
        logger.info(
            "%s",
            sources_line(self.crawler.settings, c.redis_url, c.redis_source, named, c.data_dir),
        )
        shared = await CrawlRedis.connect(c, crawl, self.worker_id, self.outage_seconds)
        self.crawl_redis = shared
        await flush_on_start(shared, self.crawler.settings, c.lease_ms, self.worker_id)
        self.frontier = frontier = await open_frontier(shared, c, self.policy.mode)
        self.end.watch(self.crawler, spider, frontier.keys)  # max_pages, continuous, scrapy-redis
        await warn_cluster_gaps(shared.redis)  # one line for each thing it lacks
        await frontier.heartbeat(self.worker_id)
        self.outbox.watch_scope(spider)  # the operator's hosts have no budget
        self.outbox.see_scope(await frontier.scope())
        # response_downloaded carries the raw answer (a 429 included) before any
        # middleware turns it into a retry; request_left_downloader follows it,
        # and alone sees failures.
        self.crawler.signals.connect(self._on_response_downloaded, signals.response_downloaded)
        self.crawler.signals.connect(self._on_left_downloader, signals.request_left_downloader)
        loops = (self._claim_loop, self._release_loop, self._write_loop, self._maintenance_loop)
        self._tasks = [asyncio.ensure_future(self._guarded(loop_fn())) for loop_fn in loops]
        # The start-up heap is built: keep later collections off it (gc_tuning.py).
        tune_gc(c.gc_threshold)
        log_opened(c, crawl, self.worker_id, shared)

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        if self.frontier is not None and not self._open_failed:
            # Last word for components that report to the crawl's Redis (the
            # status reporter): Scrapy's spider_closed comes after this close.
            await self.crawler.signals.send_catch_log_async(signal=frontier_closing)
        events = (self.clock.event, self.leases.release_event, self.outbox.event)
        await stop_loops(self._stop, events, self._tasks, STOP_TIMEOUT_SECONDS)
        shared = self.crawl_redis
        if shared is None:
            return
        if self.frontier is not None and not self._open_failed:
            parts = (self.leases, self.claims, self._write_once, self.seen, self.stats)
            back = hand_back(self.frontier, self.worker_id, *parts, self.config.lease_seconds)
            await wait_or_leave(back, self.outage_seconds)  # leases expire if Redis is away
            # SCHEDULER_PERSIST=False: only once the fleet's crawl ended (persist.py).
            if not self.config.persist and reason == "finished" and self.end.finished:
                await end_crawl(shared.redis, shared.keys, self.config.lease_ms)
        if await shared.close():
            logger.info("Last worker out: embedded Redis saved and stopped (%s)", reason)

    async def _guarded(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Frontier task failed; closing the spider")
            self.crawler.stats.inc_value("frontier/task_errors")
            # Closed from a task of its own, bounded: the close waits for this
            # task (stop_loops) and for requests that may wait on Redis.
            if self.crawler.engine is not None and not self._stop.is_set():
                engine, bound = self.crawler.engine, self.outage_seconds
                self._closer = close_or_exit(engine, FRONTIER_ERROR, bound)

    # -- the engine's side ------------------------------------------------------

    def has_pending_requests(self) -> bool:
        # Closing is decided crawl-wide (maintenance loop), not by this
        # worker's momentarily empty buffer.
        return bool(len(self.claims)) or not self.end.finished

    def next_request(self) -> Request | None:
        request = self.claims.pop()
        if request is None:
            self.clock.wake()
        return request

    def enqueue_request(self, request: Request) -> bool:
        token, parent = self.leases.take_parent(request)
        verdict = self.admission.admit(request, self._spider, parent)
        if isinstance(verdict, Refusal):
            self.stats.inc_value(verdict.stat)
            self.leases.hand_over(token, parent)
            return False
        if isinstance(verdict, SeenLocally):
            self.stats.inc_value("frontier/seen_hits_local")
            self.outbox.credit(verdict.pkey, verdict.fingerprint, verdict.credit)
            if verdict.votes is not None:
                self.outbox.add(verdict.votes, flush=False)
            return False
        if request.meta.get(SEED_META_KEY):
            root = request.meta.get(SCOPE_META_KEY)
            if isinstance(root, str):
                self.outbox.note_scope(root)
        self.outbox.add(verdict)
        self.leases.hand_over(token, parent)
        return True

    def _on_response_downloaded(self, response: Response, request: Request, spider: Spider) -> None:
        self.leases.downloaded(request, response)

    def _on_left_downloader(self, request: Request, spider: Spider) -> None:
        self.leases.downloaded(request)

    # -- the loops ----------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = Backoff(self._stop, self.outage_seconds)
        clock, end = self.clock, self.end
        while not self._stop.is_set():
            paused = self.claims.while_paused(self.crawler.engine)  # then claims nothing
            want = 0 if paused else self.config.max_claims_in_flight - self.leases.in_flight()
            if end.max_pages is not None:
                # Never more than max_pages: count what this worker holds too.
                want = min(want, end.max_pages - end.done_estimate - len(self.leases))
            if end.finished or want <= 0:
                delay = self.config.idle_poll_seconds  # a release sets the event
            else:
                delay = max(0.0, clock.not_before - loop.time())
            if delay > 0:
                await wait_event(clock.event, delay)
            clock.event.clear()
            if self._stop.is_set():
                return
            if end.finished or want <= 0 or loop.time() < clock.not_before:
                continue
            assert self.frontier is not None
            try:
                got, wait_seconds = await self.claims.claim_some(
                    self.frontier, self.worker_id, want, self._spider
                )
            except OUTAGE_ERRORS as exc:
                await backoff.sleep("claim", exc)
                continue
            backoff.reset()
            if got:
                wake_engine(self.crawler, self.outage_seconds)
                clock.not_before = 0.0
            else:
                clock.not_before = loop.time() + min(wait_seconds, self.config.idle_poll_seconds)

    async def _release_loop(self) -> None:
        """Slot releases go out at once, never queued behind a batch of links."""
        interval, event = self.config.idle_poll_seconds, self.leases.release_event
        await each_turn(
            self._stop, "release", self._release_once, event, interval, self.outage_seconds
        )

    async def _release_once(self) -> None:
        assert self.frontier is not None
        await self.leases.send_releases(self.frontier)

    async def _write_loop(self) -> None:
        interval, bound = self.config.flush_interval_seconds, self.outage_seconds
        await each_turn(self._stop, "write", self._write_once, self.outbox.event, interval, bound)

    async def _write_once(self) -> None:
        assert self.frontier is not None and self.crawl_redis is not None
        if self._known_hits:
            self.stats.inc_value("frontier/seen_hits_local", self._known_hits)
            self._known_hits = 0
        recrawl = self.crawl_redis.recrawl_store
        await self.outbox.write(self.frontier, recrawl, self.clock.new_urls, self._note_done)

    async def _maintenance_loop(self) -> None:
        period = min(self.config.lease_seconds / 3, MAINTENANCE_MAX_SECONDS)
        backoff = Backoff(self._stop, self.outage_seconds)
        while not self._stop.is_set():
            try:
                await self._maintain()
            except OUTAGE_ERRORS as exc:
                await backoff.sleep("maintenance", exc)
                continue
            backoff.reset()
            await wait_event(self._stop, period)

    async def _maintain(self) -> None:
        frontier = self.frontier
        assert frontier is not None
        await frontier.heartbeat(self.worker_id)
        gone = await self.leases.renew(frontier)
        if gone:
            self.claims.drop(gone)  # another worker may have them by now
        await self.claims.reclaim(frontier)
        await self.seeds.take(frontier, self._spider, self.enqueue_request, self._write_once)
        self.outbox.see_scope(await frontier.scope())
        await self.seen.check(frontier.redis, frontier.keys)
        # An engine not running yet (a spider still opening) has not read its
        # start requests: the crawl is not over for lack of them.
        engine = self.crawler.engine
        opening = engine is None or not engine.running
        busy_here = bool(len(self.claims) or len(self.leases) or self.outbox or opening)
        if self.end.check(await frontier.counters(), busy_here):
            wake_engine(self.crawler, self.outage_seconds)

    def _note_done(self, done: int) -> None:
        if self.end.note_done(done):
            wake_engine(self.crawler, self.outage_seconds)
