"""FrontierScheduler: Scrapy's scheduler slot, backed by the shared Redis frontier.

Why not scrapy-redis's Scheduler: its queue interface is a synchronous
``pop(timeout)`` that hands out whatever is queued (no per-host readiness, so
the greedy engine lets one worker drain the frontier), removes the request
for good (lost if the worker dies), and pickles requests. What fits is kept:
the ``REDIS_URL`` setting and the ``<crawl>:start_urls`` list convention.

How it works, per worker:

* ``enqueue_request`` is synchronous and cheap: canonicalize, fingerprint,
  encode to JSON, append to an outbox. A writer task sends the outbox in
  batches (one Lua call per shard); the seen test runs inside Redis.
* A claim task keeps a small buffer of *claimed* requests: at most
  ``CONCURRENT_REQUESTS`` leases in flight, each for a host that is ready now,
  so ``next_request`` never returns a request whose host must still wait, and
  a worker never hoards. When nothing is ready it sleeps until the earliest
  host is due (or new URLs arrive) and then wakes the engine.
* A lease's host slot is released when its response (or failure) comes back;
  the lease itself is acknowledged only after the links the page produced are
  written, so a worker that dies at any point loses nothing: its leases expire
  and their URLs go back to their queues.
* A maintenance task renews leases, reclaims expired ones (any worker's), reads
  new seeds from ``<crawl>:start_urls``, and closes the crawl once the whole
  frontier has been empty with nothing in flight for ``CRAWL_IDLE_CLOSE_SECONDS``.

All Redis I/O is asyncio (redis.asyncio) on the reactor's event loop.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from scrapy import Request, Spider, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import load_object
from twisted.internet.defer import Deferred

from crawlproject.frontier.client import (
    NO_PATTERN,
    NO_VOTE,
    SEED_VOTE,
    AddResult,
    FrontierMismatch,
    Lease,
    NewEntry,
    RedisFrontier,
    Release,
)
from crawlproject.frontier.codec import RequestCodec, RequestDecodeError, RequestEncodeError
from crawlproject.frontier.config import FrontierConfig
from crawlproject.frontier.connection import is_setup_error, redis_client
from crawlproject.frontier.embedded import (
    WORKER_CLIENT_PREFIX,
    EmbeddedRedis,
    EmbeddedRedisError,
)
from crawlproject.frontier.outcomes import FRONTIER_ERROR, FRONTIER_UNAVAILABLE
from crawlproject.frontier.persist import end_crawl
from crawlproject.frontier.politeness import retry_after_seconds
from crawlproject.frontier.priority import (
    CREDIT_META_KEY,
    CREDIT_MODE,
    SHARE_META_KEY,
    PriorityPolicy,
    build_policy,
)
from crawlproject.frontier.redis_settings import sources_line
from crawlproject.frontier.urls import (
    InvalidURL,
    UrlCanonicalizer,
    domain_key,
    host_key,
)
from crawlproject.frontier.votes import LINK_FROM_META_KEY, LinkVotes
from crawlproject.frontier.wake import wake_engine
from crawlproject.recrawl.store import RecrawlStore, StateWrite
from crawlproject.rules.traps import OncePerKey, token_shape, url_pattern
from crawlproject.rules.url_rules import UrlRules

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

LEASE_META_KEY = "crawl_lease"
SEED_META_KEY = "crawl_seed"
SCOPE_META_KEY = "crawl_scope"
OUTBOX_FLUSH_ENTRIES = 1000  # flush early when this many URLs wait
START_URLS_BATCH = 100
REDIS_RETRY_MAX_SECONDS = 5.0
MAINTENANCE_MAX_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 10.0
CONNECT_ATTEMPTS = 3  # at start: 1 s, then 2 s between attempts
TRAP_LOG_HOSTS = 100_000  # hosts remembered per guard for "logged once per host"
# done: finished here; moved: a redirect or retry took the URL over; dead:
# undecodable; return: its item could not be saved (ItemNotSaved), fetch it again.
ACK_MODES = ("done", "moved", "dead", "return")


class LeaseState(enum.Enum):
    FETCHING = "fetching"  # holds its host slot
    DOWNLOADED = "downloaded"  # slot released; the downloader may still redirect/retry
    SCRAPING = "scraping"  # the spider has the response


@dataclass(slots=True)
class _Held:
    lease: Lease
    state: LeaseState
    url: str
    dont_filter: bool


class FrontierScheduler(BaseScheduler):
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
        self.rules = rules
        self.policy = policy
        self._credit_mode = policy.mode == CREDIT_MODE
        self._trap_logged = OncePerKey(TRAP_LOG_HOSTS)
        self.worker_id = uuid.uuid4().hex[:12]
        self.canonicalizer = UrlCanonicalizer(config.session_params)
        self.codec = RequestCodec(config.request_classes)
        self._pkey = host_key if config.politeness_key == "host" else domain_key
        self.frontier: RedisFrontier | None = None
        self._redis: Redis | None = None
        self._embedded: EmbeddedRedis | None = None
        self._spider: Spider | None = None
        self._max_pages: int | None = None
        self._done_estimate = 0  # crawl-wide finished URLs, as last seen

        self._buffer: deque[Request] = deque()  # claimed, not yet handed out
        self._held: dict[str, _Held] = {}  # every lease this worker holds
        self._outbox: list[NewEntry] = []
        # AOPIC credit for URLs sent before: fingerprint -> (politeness key,
        # credit), summed until the next write (navigation links repeat on
        # every page of a site: one Redis update per URL and write, not per link).
        self._credits: dict[bytes, tuple[str, float]] = {}
        # (ack mode, lease), sent after the outbox entries queued before them.
        self._acks: list[tuple[str, Lease]] = []
        # Recrawl fetch states (middlewares/recrawl.py), written before the
        # acks queued after them: a page's next due time never lags its ack.
        self._tracks: list[StateWrite] = []
        self._recrawl: RecrawlStore | None = None
        # (loop time of the response, its release): the host's delay runs from
        # the response; the release's age is filled in when it is sent.
        self._releases: list[tuple[float, Release]] = []
        self._release_event = asyncio.Event()
        self._new_scope: set[str] = set()
        self._recent = RecentFingerprints(config.local_seen_size)
        self._votes = LinkVotes()
        self.scope_roots: frozenset[str] = frozenset()

        self._tasks: list[asyncio.Task[None]] = []
        self._write_event = asyncio.Event()
        self._claim_event = asyncio.Event()
        self._claim_not_before = 0.0  # loop time; set when nothing was ready
        self._shard_next_ready: dict[int, float] = {}  # loop time at which a shard has work
        self._next_shard = 0
        self._stop = asyncio.Event()  # loops end at their next turn; never cancelled mid-I/O
        self._open_failed = False
        self._closer: asyncio.Future[None] | None = None
        self._finished = False
        self._continuous = False
        self._idle_since: float | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        assert crawler.stats is not None
        config = FrontierConfig.from_settings(crawler.settings)
        return cls(
            crawler=crawler,
            config=config,
            stats=crawler.stats,
            rules=UrlRules.from_settings(crawler.settings),
            policy=build_policy(crawler, config.priority_policy),
        )

    # -- lifecycle ----------------------------------------------------------------

    def open(self, spider: Spider) -> Deferred[None]:
        return deferred_from_coro(self._open(spider))

    async def _open(self, spider: Spider) -> None:
        try:
            await self._connect(spider)
        except (RedisError, OSError, EmbeddedRedisError, FrontierMismatch, ValueError) as exc:
            where = "the embedded Redis" if self.config.redis_url is None else "REDIS_URL"
            logger.error(
                "Cannot open the frontier (%s at %s): %s",
                type(exc).__name__,
                where if self.config.redis_url is None else _redacted(self.config.redis_url),
                exc,
            )
            # Raising CloseSpider here would leave Scrapy's scraper unopened
            # (and its close failing noisily): let the engine finish opening,
            # then close the spider with a reason that says why.
            self._open_failed = True
            self._finished = True
            self.crawler.signals.connect(self._close_unavailable, signals.spider_opened)

    def _close_unavailable(self, spider: Spider) -> None:
        engine = self.crawler.engine
        if engine is not None:
            self._closer = asyncio.ensure_future(
                engine.close_spider_async(reason=FRONTIER_UNAVAILABLE)
            )

    async def _connect(self, spider: Spider) -> None:
        self._spider = spider
        crawl = getattr(spider, "crawl_name", None) or self.config.crawl
        self._max_pages = getattr(spider, "crawl_max_pages", None)
        # A continuous crawl (-a mode=continuous) waits for recrawls instead of
        # finishing when the frontier is empty.
        self._continuous = bool(getattr(spider, "continuous", False))
        name = WORKER_CLIENT_PREFIX + self.worker_id
        c = self.config
        logger.info(
            "%s",
            sources_line(self.crawler.settings, c.redis_url, c.redis_source, crawl, c.data_dir),
        )
        if self.config.redis_url is None:
            self._embedded = EmbeddedRedis(self.config.data_dir)
            self._redis = await self._embedded.connect(client_name=name)
        else:
            self._redis = redis_client(self.config.redis_url, client_name=name)
        self.frontier = RedisFrontier(
            self._redis,
            self.config.crawl_keys(crawl),
            seen_bucket_bits=self.config.seen_bucket_bits,
            default_delay_ms=self.config.host_delay_ms,
            default_concurrency=self.config.host_concurrency,
            lease_ms=self.config.lease_ms,
            adaptive=self.config.adaptive,
            priority_mode=self.policy.mode,
            aopic_tax=self.config.aopic_tax,
            host_url_cap=self.config.max_pages_per_host,
            pattern_url_cap=self.config.max_urls_per_pattern,
            max_reclaims=self.config.max_reclaims,
            budget=self.config.budget,
        )
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            try:
                await self.frontier.prepare()
                break
            except RedisConnectionError as exc:
                # A TLS or certificate-file error is the URL's, not a Redis
                # still starting: say so once, at once.
                if attempt == CONNECT_ATTEMPTS or is_setup_error(exc, self.config.redis_url or ""):
                    raise
                logger.warning("Frontier Redis not reachable yet (%s); retrying", exc)
                await asyncio.sleep(0.5 * 2**attempt)
        for host, o in self.config.host_overrides.items():
            delay_ms = None if o.delay_seconds is None else round(o.delay_seconds * 1000)
            await self.frontier.set_host_config(host, delay_ms, o.concurrency)
        await self.frontier.heartbeat(self.worker_id)
        self.scope_roots = frozenset(await self.frontier.scope())
        # response_downloaded carries the raw answer (a 429 included) before any
        # middleware turns it into a retry; request_left_downloader follows it,
        # and alone sees failures.
        self.crawler.signals.connect(self._on_response_downloaded, signals.response_downloaded)
        self.crawler.signals.connect(self._on_left_downloader, signals.request_left_downloader)
        for loop_fn in (
            self._claim_loop,
            self._release_loop,
            self._write_loop,
            self._maintenance_loop,
        ):
            self._tasks.append(asyncio.ensure_future(self._guarded(loop_fn())))
        logger.info(
            "Frontier open: crawl %r, worker %s, %s, delay %.3f s, %d slot(s) per host",
            crawl,
            self.worker_id,
            "embedded Redis" if self._embedded else "shared Redis",
            self.config.host_delay_seconds,
            self.config.host_concurrency,
        )

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        if self.frontier is not None and not self._open_failed:
            # Last word for components that report to the crawl's Redis (the
            # status reporter): Scrapy's spider_closed comes after this close.
            await self.crawler.signals.send_catch_log_async(signal=frontier_closing)
        # Cancelling a task in the middle of a redis-py call can leave the call
        # half done (and redis-py may swallow the cancellation), so the loops
        # are asked to stop and end at their next turn.
        self._stop.set()
        self._claim_event.set()
        self._release_event.set()
        self._write_event.set()
        _, stuck = (
            await asyncio.wait(self._tasks, timeout=STOP_TIMEOUT_SECONDS)
            if self._tasks
            else (set(), set())
        )
        for task in stuck:
            logger.warning("Frontier task did not stop in %.0f s; cancelling", STOP_TIMEOUT_SECONDS)
            task.cancel()
        if self._redis is None:
            return
        if self.frontier is not None and not self._open_failed:
            try:
                await self._hand_back()
            except RedisError as exc:
                logger.warning(
                    "Could not hand unfinished work back (%s): its leases expire within "
                    "%.0f s and it returns to the queues then",
                    exc,
                    self.config.lease_seconds,
                )
            # SCHEDULER_PERSIST=False: only once the fleet's crawl ended (persist.py).
            if not self.config.persist and reason == "finished" and self._finished:
                await end_crawl(self._redis, self.frontier.keys, self.config.lease_ms)
        if self._embedded is None:
            await self._redis.aclose()
        elif await self._embedded.leave(self._redis, self.worker_id):
            logger.info("Last worker out: embedded Redis saved and stopped (%s)", reason)

    async def _hand_back(self) -> None:
        """Writes what is pending and returns unfinished URLs to their queues."""
        assert self.frontier is not None
        unfinished = [h.lease for h in self._held.values()]
        self._buffer.clear()
        self._held.clear()
        await self._release_once()
        await self._write_once()
        if unfinished:
            acked, _ = await self.frontier.ack(unfinished, mode="return")
            self.stats.inc_value("frontier/returned", acked)
            logger.info("Returned %d unfinished URL(s) to the frontier", acked)
        await self.frontier.forget_worker(self.worker_id)

    async def _guarded(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Frontier task failed; closing the spider")
            self.crawler.stats.inc_value("frontier/task_errors")
            if self.crawler.engine is not None and not self._stop.is_set():
                await self.crawler.engine.close_spider_async(reason=FRONTIER_ERROR)

    # -- the engine's side ------------------------------------------------------

    def has_pending_requests(self) -> bool:
        # Closing is decided crawl-wide (maintenance loop), not by this
        # worker's momentarily empty buffer.
        return bool(self._buffer) or not self._finished

    def next_request(self) -> Request | None:
        if self._buffer:
            return self._buffer.popleft()
        self._claim_event.set()
        return None

    def enqueue_request(self, request: Request) -> bool:
        token = request.meta.pop(LEASE_META_KEY, None)
        held = self._held.get(token) if token else None
        # A request carrying a lease that the spider has not seen yet comes from
        # the downloader (a redirect or a retry): it takes the URL over.
        parent = held if held is not None and held.state is not LeaseState.SCRAPING else None
        try:
            canonical = self.canonicalizer.canonicalize(request.url)
        except InvalidURL as exc:
            self.stats.inc_value("frontier/invalid_url")
            logger.debug("Skipped: %s", exc)
            self._hand_over(token, parent)
            return False
        refused = self.rules.check(canonical)
        if refused is not None:  # before the seen test: a refused URL costs no lookup
            self.stats.inc_value(f"rules/{refused}")
            logger.debug("Not queued (rule %s): %s", refused, request.url)
            if refused == "url_too_long":  # one hostile page may hold thousands: once per host
                host = urlsplit(canonical).netloc
                if self._trap_logged.first(f"{refused} {host}"):
                    logger.info(
                        "URL rule %s: not queueing some URLs of %s (e.g. %.200s...)",
                        refused,
                        host,
                        canonical,
                    )
            self._hand_over(token, parent)
            return False
        depth = request.meta.get("depth", 0)
        if self.config.max_depth and isinstance(depth, int) and depth > self.config.max_depth:
            self.stats.inc_value("trap/max_depth")
            self._log_trap("max_depth", canonical)
            self._hand_over(token, parent)
            return False
        pkey = self._pkey(canonical)
        value = self.policy.value(request)
        for key in (CREDIT_META_KEY, SHARE_META_KEY):  # in the entry's number, not stored
            request.meta.pop(key, None)
        # The trap guards' signals (crawlproject/frontier/votes.py), not stored either.
        if request.meta.get(SEED_META_KEY):
            vote = SEED_VOTE
        else:
            vote = self._votes.vote(request.meta.pop(LINK_FROM_META_KEY, None), canonical)
        shape = token_shape(canonical) if self.config.trap_token_urls else None
        fingerprint = self.canonicalizer.fingerprint(canonical, request.method, request.body)
        if parent is None and not request.dont_filter and fingerprint in self._recent:
            # Sent to the frontier already (added, or found seen there): most
            # links repeat, and this spares their encoding and a Redis lookup.
            # AOPIC still owes the URL its credit: a credit-only entry; a new
            # voter for the host, or a repeated token, a vote-only one.
            self.stats.inc_value("frontier/seen_hits_local")
            self._send_credit(pkey, fingerprint, value)
            first_vote = self._votes.first(vote, pkey)
            if first_vote or shape:
                self._outbox.append(
                    NewEntry(
                        pkey,
                        fingerprint,
                        False,
                        b"",
                        token_shape=shape or NO_PATTERN,
                        vote=vote if first_vote else NO_VOTE,
                        vote_only=True,
                    )
                )
            return False
        self._recent.add(fingerprint)
        bypass_seen = request.dont_filter
        if parent is not None:
            if canonical == self._canonical_or_none(parent.url):
                # A retry: the URL is in the seen set already. Scrapy marks
                # retries dont_filter; the stored request keeps the original
                # flag, so a redirect after the retry is still seen-tested.
                bypass_seen, request.dont_filter = True, parent.dont_filter
            else:
                bypass_seen = parent.dont_filter
        try:
            data = self.codec.encode(request, self._spider)
        except RequestEncodeError as exc:
            self.stats.inc_value("frontier/unserializable")
            logger.warning("Skipped a request that cannot be stored as JSON: %s", exc)
            self._hand_over(token, parent)
            return False
        if request.meta.get(SEED_META_KEY):
            root = request.meta.get(SCOPE_META_KEY)
            if isinstance(root, str) and root not in self.scope_roots:
                self._new_scope.add(root)
        # The query shape key is only read by the per-shape cap.
        pattern = url_pattern(canonical) if self.config.max_urls_per_pattern else None
        self._outbox.append(
            NewEntry(
                pkey=pkey,
                fingerprint=fingerprint,
                dont_filter=bypass_seen,
                data=data,
                score=value,
                pattern=pattern or NO_PATTERN,
                token_shape=shape or NO_PATTERN,
                vote=vote if self._votes.first(vote, pkey) else NO_VOTE,
            )
        )
        self._hand_over(token, parent)
        if len(self._outbox) >= OUTBOX_FLUSH_ENTRIES:
            self._write_event.set()
        return True

    def give_credit(self, request: Request, credit: float) -> None:
        """AOPIC: adds ``credit`` to ``request``'s URL if it is queued, else to
        the lambda cash (a page with no links gives its credit to all)."""
        canonical = self._canonical_or_none(request.url)
        if canonical is not None:
            fingerprint = self.canonicalizer.fingerprint(canonical, request.method, request.body)
            self._send_credit(self._pkey(canonical), fingerprint, credit)

    def _send_credit(self, pkey: str, fingerprint: bytes, credit: float) -> None:
        if not self._credit_mode or credit <= 0:
            return
        pending = self._credits.get(fingerprint)
        if pending is not None:
            self.stats.inc_value("frontier/credits_merged")
            credit += pending[1]
        self._credits[fingerprint] = (pkey, credit)

    def _hand_over(self, token: str | None, parent: _Held | None) -> None:
        """The old lease of a redirect or retry is done once the new request is
        stored (the writer sends URLs before acknowledgements), or dropped."""
        if parent is None or token is None:
            return
        del self._held[token]
        self._acks.append(("moved", parent.lease))
        self.stats.inc_value("frontier/continuations")

    def _log_trap(self, guard: str, url: str) -> None:
        host = urlsplit(url).netloc
        if self._trap_logged.first(f"{guard} {host}"):
            logger.info("Trap guard %s: not queueing some URLs of %s (e.g. %s)", guard, host, url)

    def _canonical_or_none(self, url: str) -> str | None:
        try:
            return self.canonicalizer.canonicalize(url)
        except InvalidURL:
            return None

    # -- lease outcomes (signals and the frontier_ack middlewares) ---------------

    def _lookup(self, request: Request) -> _Held | None:
        token = request.meta.get(LEASE_META_KEY)
        return self._held.get(token) if isinstance(token, str) else None

    def _end_fetch(self, request: Request) -> _Held | None:
        """The lease whose slot ``request`` held, now marked downloaded; None if
        it held none (not claimed here, or its fetch already ended)."""
        held = self._lookup(request)
        if held is None or held.state is not LeaseState.FETCHING:
            return None
        held.state = LeaseState.DOWNLOADED
        return held

    def _release(self, request: Request, response: Response | None = None) -> None:
        held = self._end_fetch(request)
        if held is None:
            return
        fetch_ms, hold_ms, throttled = -1, 0, False
        if response is not None:
            latency = request.meta.get("download_latency")
            if isinstance(latency, int | float):
                fetch_ms = max(0, round(latency * 1000))
            if response.status in self.config.backoff_http_codes:
                throttled = True
                self.stats.inc_value("frontier/backoff")
                wait = retry_after_seconds(response.headers.get(b"Retry-After"))
                if wait is not None:
                    hold_ms = round(min(wait, self.config.backoff_max_seconds) * 1000)
                    self.stats.inc_value("frontier/retry_after")
        self._queue_release(
            Release(held.lease, 0, fetch_ms=fetch_ms, hold_ms=hold_ms, throttled=throttled)
        )

    def _queue_release(self, release: Release, at: float | None = None) -> None:
        now = asyncio.get_event_loop().time()
        self._releases.append((now if at is None else at, release))
        self._release_event.set()
        self._claim_event.set()  # a download slot of this worker is free again
        # The host will be due again about one delay from now: look then,
        # rather than at the next idle poll (which may be later).
        due = now + max(self.config.host_delay_seconds, release.hold_ms / 1000)
        shard = release.lease.shard
        if self._shard_next_ready.get(shard, 0.0) > due:
            self._shard_next_ready[shard] = due
        self._claim_not_before = min(self._claim_not_before, due)

    def _on_response_downloaded(self, response: Response, request: Request, spider: Spider) -> None:
        self._release(request, response)

    def _on_left_downloader(self, request: Request, spider: Spider) -> None:
        self._release(request)

    # -- recrawl tracking (middlewares/recrawl.py) ----------------------------------

    def track_fetch(self, url: str, state: str | None, due_s: int) -> None:
        """Records ``url``'s fetch state (text, crawlproject/recrawl/schedule.py)
        and next due time, or forgets it (``state`` None), with the next write:
        before the acks of the URLs whose outcome it records."""
        canonical = self._canonical_or_none(url)
        if canonical is None:
            return
        fingerprint = self.canonicalizer.fingerprint(canonical)
        self._tracks.append(StateWrite(self._pkey(canonical), fingerprint, state, due_s))
        self._write_event.set()

    def recrawl_store(self) -> RecrawlStore:
        """The crawl's recrawl schedule (same Redis, same shards)."""
        assert self.frontier is not None, "the frontier is not open"
        if self._recrawl is None:
            self._recrawl = RecrawlStore(self.frontier.redis, self.frontier.keys)
        return self._recrawl

    # -- the public side of a lease, for downloader middlewares -------------------

    def politeness_key(self, url: str) -> str:
        """The frontier's politeness key (host or registered domain) of ``url``."""
        return self._pkey(self.canonicalizer.canonicalize(url))

    def holds_slot(self, request: Request) -> bool:
        """Whether ``request`` holds its host's politeness slot here (a claimed,
        not yet downloaded URL): what it does now counts as a contact with the host."""
        held = self._lookup(request)
        return held is not None and held.state is LeaseState.FETCHING

    def defer(
        self,
        request: Request,
        hold_seconds: float = 0.0,
        contacted_at: float | None = None,
        fetch_seconds: float | None = None,
        throttled: bool = False,
    ) -> bool:
        """Gives a claimed URL back to the head of its host queue without fetching it.

        Its slot was used for something else (``contacted_at``: loop time the
        host last answered, e.g. its robots.txt) or the host must be left alone
        for ``hold_seconds``. The caller then drops the request (IgnoreRequest).
        Returns False if ``request`` does not hold a slot here.
        """
        if not self.holds_slot(request):
            return False
        token = request.meta.get(LEASE_META_KEY)
        held = self._held.pop(token) if isinstance(token, str) else None
        assert held is not None
        self._queue_release(
            Release(
                held.lease,
                0,
                fetch_ms=-1 if fetch_seconds is None else max(0, round(fetch_seconds * 1000)),
                hold_ms=round(min(max(hold_seconds, 0.0), self.config.backoff_max_seconds) * 1000),
                throttled=throttled,
                requeue=True,
                contacted=contacted_at is not None,
            ),
            at=contacted_at,
        )
        self.stats.inc_value("frontier/deferred")
        return True

    def release_unfetched(self, request: Request) -> None:
        """Frees the slot of a claimed URL that will not be fetched (e.g.
        robots.txt forbids it) and made no contact with its host, so the host's
        next URL need not wait a delay for it. The URL is then finished as usual."""
        held = self._end_fetch(request)
        if held is not None:
            self._queue_release(Release(held.lease, 0, contacted=False))

    def lease_scraping(self, request: Request) -> None:
        """The spider got the response: requests carrying its lease are its links."""
        held = self._lookup(request)
        if held is not None:
            held.state = LeaseState.SCRAPING

    def lease_done(self, request: Request, outcome: str) -> None:
        """The URL is finished (``outcome`` for the stats: scraped, failed, spider_error)."""
        self._end_lease(request, "done", outcome)

    def lease_returned(self, request: Request) -> None:
        """The URL was fetched but its item could not be saved (ItemNotSaved,
        crawlproject/frontier/outcomes.py): back to the head of its host's
        queue, after the links its page produced (the writer sends URLs before
        acknowledgements), so a worker fetches it again."""
        self._end_lease(request, "return", "not_saved")

    def _end_lease(self, request: Request, ack_mode: str, outcome: str) -> None:
        token = request.meta.get(LEASE_META_KEY)
        held = self._held.pop(token, None) if isinstance(token, str) else None
        if held is None:
            return
        if held.state is LeaseState.FETCHING:
            self._claim_event.set()
        self._acks.append((ack_mode, held.lease))
        self.stats.inc_value(f"frontier/outcome/{outcome}")
        self._write_event.set()

    def download_failed(self, request: Request) -> None:
        """A download failure reached the spider's errback: finishes its URL.

        The downloader middleware acks failures in process_exception, but Scrapy
        sends an exception raised by a middleware's process_response (a gzip
        bomb over DOWNLOAD_MAXSIZE, REDIRECT_MAX_TIMES used up) past every
        process_exception, straight to the errback: without this its lease
        would stay held. Idempotent: a lease already finished, or given back by
        ``defer`` (robots.txt), is not held any more and nothing happens; a
        lease the spider middleware has (an HttpError) is acked by it.
        """
        held = self._lookup(request)
        if held is not None and held.state is not LeaseState.SCRAPING:
            self.lease_done(request, "failed")

    # -- claim loop ------------------------------------------------------------------

    def _in_flight(self) -> int:
        return sum(1 for h in self._held.values() if h.state is LeaseState.FETCHING)

    async def _claim_loop(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = _Backoff(self._stop)
        while not self._stop.is_set():
            want = self.config.max_claims_in_flight - self._in_flight()
            if self._max_pages is not None:
                # Never more than max_pages: count what this worker holds too.
                want = min(want, self._max_pages - self._done_estimate - len(self._held))
            if self._finished or want <= 0:
                delay = self.config.idle_poll_seconds  # a release sets the event
            else:
                delay = max(0.0, self._claim_not_before - loop.time())
            if delay > 0:
                await _wait(self._claim_event, delay)
            self._claim_event.clear()
            if self._stop.is_set():
                return
            if self._finished or want <= 0 or loop.time() < self._claim_not_before:
                continue
            try:
                got, wait_seconds = await self._claim_some(want)
            except RedisError as exc:
                await backoff.sleep("claim", exc)
                continue
            backoff.reset()
            if got:
                wake_engine(self.crawler)
                self._claim_not_before = 0.0
            else:
                self._claim_not_before = loop.time() + min(
                    wait_seconds, self.config.idle_poll_seconds
                )

    async def _claim_some(self, want: int) -> tuple[int, float]:
        """Claims up to ``want`` across shards; returns (claimed, seconds until more)."""
        assert self.frontier is not None
        loop = asyncio.get_running_loop()
        shards = self.config.shards
        got = 0
        wait = self.config.idle_poll_seconds
        for i in range(shards):
            shard = (self._next_shard + i) % shards
            if got >= want:
                break
            if self._shard_next_ready.get(shard, 0.0) > loop.time():
                wait = min(wait, self._shard_next_ready[shard] - loop.time())
                continue
            batch = await self.frontier.claim(shard, want - got, self.worker_id)
            if batch.next_ready_ms is None:
                self._shard_next_ready[shard] = loop.time() + self.config.idle_poll_seconds
            else:
                ahead = max(0.0, (batch.next_ready_ms - batch.now_ms) / 1000)
                self._shard_next_ready[shard] = loop.time() + ahead
                wait = min(wait, ahead)
            for i, (lease, data) in enumerate(batch.items):
                got += self._accept_claim(lease, data, batch.shares[i] if batch.shares else None)
        self._next_shard = (self._next_shard + 1) % shards
        return got, wait

    def _accept_claim(self, lease: Lease, data: bytes, share: float | None) -> int:
        try:
            request = self.codec.decode(data, self._spider)
        except RequestDecodeError as exc:
            self.stats.inc_value("frontier/undecodable")
            logger.error("Moved an undecodable frontier entry to the dead list: %s", exc)
            self._acks.append(("dead", lease))
            self._write_event.set()
            return 0
        request.meta[LEASE_META_KEY] = lease.token
        if share is not None:
            request.meta[SHARE_META_KEY] = share
        self._held[lease.token] = _Held(
            lease, LeaseState.FETCHING, request.url, request.dont_filter
        )
        self._buffer.append(request)
        self.stats.inc_value("frontier/claims")
        return 1

    # -- writer loop ------------------------------------------------------------------

    async def _release_loop(self) -> None:
        """Slot releases go out at once, never queued behind a batch of links."""
        await self._each_turn(
            "release", self._release_once, self._release_event, self.config.idle_poll_seconds
        )

    async def _each_turn(
        self,
        what: str,
        once: Callable[[], Awaitable[None]],
        event: asyncio.Event,
        interval_seconds: float,
    ) -> None:
        """Runs ``once`` when ``event`` is set or every interval, until stopped."""
        backoff = _Backoff(self._stop)
        while not self._stop.is_set():
            await _wait(event, interval_seconds)
            event.clear()
            try:
                await once()
            except RedisError as exc:
                await backoff.sleep(what, exc)
                continue
            backoff.reset()

    async def _release_once(self) -> None:
        assert self.frontier is not None
        if not self._releases:
            return
        batch, self._releases = self._releases, []
        now = asyncio.get_running_loop().time()
        # Each release says how long ago its response came: Redis starts the
        # host's delay then (its own clock minus that), not when the call lands.
        releases = [replace(r, age_ms=round((now - at) * 1000)) for at, r in batch]
        try:
            self.stats.inc_value("frontier/releases", await self.frontier.release(releases))
        except RedisError:
            self._releases[:0] = batch
            raise

    async def _write_loop(self) -> None:
        await self._each_turn(
            "write", self._write_once, self._write_event, self.config.flush_interval_seconds
        )

    async def _write_once(self) -> None:
        """New URLs, then the acknowledgements queued after them."""
        assert self.frontier is not None
        if self._new_scope:
            roots, self._new_scope = self._new_scope, set()
            await self.frontier.add_scope(roots)
            self.scope_roots = self.scope_roots | roots
        if self._credits:  # after the URLs of this write, so a new URL gets its credit
            credits, self._credits = self._credits, {}
            self._outbox += [
                NewEntry(pkey, fp, False, b"", credit, credit_only=True)
                for fp, (pkey, credit) in credits.items()
            ]
        if not (self._outbox or self._acks or self._tracks):
            return
        entries, self._outbox = self._outbox, []
        acks, self._acks = self._acks, []
        tracks, self._tracks = self._tracks, []
        try:
            if tracks:
                await self.recrawl_store().write(tracks)
                self.stats.inc_value("recrawl/states_written", len(tracks))
                tracks = []
            if entries:
                result = await self.frontier.add(entries)
                self.stats.inc_value("frontier/enqueued", result.added)
                self.stats.inc_value("frontier/seen_hits", result.seen_hits)
                self._count_caps(result)
                if result.added:
                    self._shard_next_ready.clear()  # new URLs may be ready now
                    self._claim_not_before = 0.0
                    self._claim_event.set()
                entries = []
            for mode in ACK_MODES:
                leases = [lease for m, lease in acks if m == mode]
                if not leases:
                    continue
                acked, missing = await self.frontier.ack(leases, mode=mode)
                acks = [(m, lease) for m, lease in acks if m != mode]
                self._note_done(sum(self.frontier.done_seen.values()))
                self.stats.inc_value("frontier/acks", acked)
                if missing:
                    self.stats.inc_value("frontier/late_acks", missing)
        finally:
            # Whatever was not written is kept, in order, for the next attempt.
            self._outbox[:0] = entries
            self._acks[:0] = acks
            self._tracks[:0] = tracks

    def _count_caps(self, result: AddResult) -> None:
        for stat, count, hosts, what in (
            ("trap/host_cap", result.host_capped, result.newly_capped, "CRAWL_MAX_PAGES_PER_HOST"),
            (
                "trap/pattern_cap",
                result.pattern_capped,
                result.newly_pattern_capped,
                "CRAWL_MAX_URLS_PER_PATTERN",
            ),
            (
                "trap/over_budget",
                result.over_budget,
                result.newly_over_budget,
                "its budget (CRAWL_HOST_BUDGET x votes); further URLs wait for more votes",
            ),
        ):
            if count:
                self.stats.inc_value(stat, count)
            for host in hosts:  # reported once per crawl by the frontier, fleet-wide
                logger.info("Trap guard: %s reached %s; further URLs are not queued", host, what)
        if result.token_parked:
            self.stats.inc_value("trap/token_parked", result.token_parked)
        for host, shape in result.newly_contained:
            self.stats.inc_value("trap/token_shapes")
            logger.info(
                "Trap guard: %s mints a new token in every link of one URL shape (%s: "
                "CRAWL_TRAP_TOKEN_URLS new URLs, almost none seen twice); its URLs of that "
                "shape are parked (crawlproject parked --reasons)",
                host,
                shape,
            )
        if result.released:
            self.stats.inc_value("frontier/budget_released", result.released)
        if result.credited:
            self.stats.inc_value("frontier/credited", result.credited)

    # -- maintenance loop ---------------------------------------------------------------

    async def _maintenance_loop(self) -> None:
        period = min(self.config.lease_seconds / 3, MAINTENANCE_MAX_SECONDS)
        backoff = _Backoff(self._stop)
        while not self._stop.is_set():
            try:
                await self._maintain()
            except RedisError as exc:
                await backoff.sleep("maintenance", exc)
                continue
            backoff.reset()
            await _wait(self._stop, period)

    async def _maintain(self) -> None:
        assert self.frontier is not None
        await self.frontier.heartbeat(self.worker_id)
        if self._held:
            lost = await self.frontier.renew([h.lease for h in self._held.values()])
            for lease in lost:
                self._held.pop(lease.token, None)
            if lost:
                # Another worker may have them by now: never start those fetches.
                gone = {lease.token for lease in lost}
                self._buffer = deque(
                    r for r in self._buffer if r.meta.get(LEASE_META_KEY) not in gone
                )
                self.stats.inc_value("frontier/leases_lost", len(lost))
                logger.warning("%d lease(s) expired before renewal (worker stalled?)", len(lost))
        for shard in range(self.config.shards):
            reclaimed, poisoned = await self.frontier.reclaim(shard)
            if poisoned:
                self.stats.inc_value("frontier/poisoned", poisoned)
                logger.warning(
                    "Set aside %d URL(s) of shard %d as poison: reclaimed %d times, each "
                    "worker that took them died or hung (see crawlproject poisoned)",
                    poisoned,
                    shard,
                    self.config.max_reclaims,
                )
            if reclaimed:
                self.stats.inc_value("frontier/leases_reclaimed", reclaimed)
                logger.info("Reclaimed %d expired lease(s) in shard %d", reclaimed, shard)
                self._shard_next_ready.pop(shard, None)
                self._claim_event.set()
        await self._take_start_urls()
        self.scope_roots = self.scope_roots | await self.frontier.scope()
        await self._check_finished()

    async def _take_start_urls(self) -> None:
        assert self.frontier is not None
        raw = await self.frontier.read_start_urls(START_URLS_BATCH)
        if not raw:
            return
        for item in reversed(raw):  # oldest first
            request = self._start_url_request(item)
            if request is not None:
                self.enqueue_request(request)
        await self._write_once()  # stored before they leave the list
        await self.frontier.trim_start_urls(raw)
        self.stats.inc_value("frontier/start_urls", len(raw))

    def _start_url_request(self, item: bytes) -> Request | None:
        text = item.decode("utf-8", "replace").strip()
        meta: dict[str, Any] = {}
        url = text
        if text.startswith("{"):
            try:
                obj = json.loads(text)
                url = obj["url"]
                meta = dict(obj.get("meta") or {})
            except (ValueError, KeyError, TypeError):
                self.stats.inc_value("frontier/bad_start_url")
                logger.warning("Skipped a malformed start_urls entry: %.200r", text)
                return None
        make = getattr(self._spider, "make_seed_request", None)
        try:
            request = make(url) if callable(make) else Request(url)
        except (ValueError, TypeError) as exc:
            self.stats.inc_value("frontier/bad_start_url")
            logger.warning("Skipped start_urls entry %.200r: %s", text, exc)
            return None
        request.meta.update(meta)
        return request

    def _note_done(self, done: int) -> None:
        self._done_estimate = max(self._done_estimate, done)
        if self._max_pages is not None and self._done_estimate >= self._max_pages:
            if not self._finished:
                logger.info("max_pages=%d reached crawl-wide: finishing", self._max_pages)
                self._finished = True
            wake_engine(self.crawler)

    async def _check_finished(self) -> None:
        assert self.frontier is not None
        counters = await self.frontier.counters()
        self._note_done(counters.get("done", 0))
        pending = counters.get("queued", 0) + counters.get("leased", 0)
        pending += counters.get("start_urls", 0)
        local = bool(
            self._buffer or self._held or self._outbox or self._credits or self._acks
            or self._tracks
        )  # fmt: skip
        now = time.monotonic()
        if not self._finished:
            if pending or local or self._continuous:
                self._idle_since = None
                return
            if self._idle_since is None:
                self._idle_since = now
                return
            if now - self._idle_since < self.config.idle_close_seconds:
                return
            logger.info(
                "Frontier empty and nothing in flight for %.1f s: finishing",
                now - self._idle_since,
            )
            self._finished = True
        wake_engine(self.crawler)


# Signal sent when the frontier scheduler starts closing, while its Redis is
# still open (no arguments). Connect with crawler.signals.connect(handler,
# signal=frontier_closing).
frontier_closing = object()


def is_frontier(obj: object) -> bool:
    """Whether ``obj`` (a scheduler or its class) is the FrontierScheduler.

    Scrapy's BaseSchedulerMeta makes isinstance/issubclass duck-typed (true for
    any scheduler), so this looks at the class hierarchy itself."""
    cls = obj if isinstance(obj, type) else type(obj)
    return FrontierScheduler in cls.__mro__


def frontier_of(crawler: Crawler) -> FrontierScheduler:
    """The running crawl's FrontierScheduler (for components that require it)."""
    engine = crawler.engine
    assert engine is not None and is_frontier(engine.scheduler)
    return cast(FrontierScheduler, engine.scheduler)


def require_frontier(crawler: Crawler) -> None:
    """For components that only work on the frontier: NotConfigured otherwise."""
    if not is_frontier(load_object(crawler.settings["SCHEDULER"])):
        raise NotConfigured("SCHEDULER is not the crawlproject frontier")


class RecentFingerprints:
    """A bounded set of the fingerprints this worker sent to the frontier.

    Two generations: when the young one is full it becomes the old one and the
    oldest generation is dropped, so memory stays within 2 x ``size`` entries.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._young: set[bytes] = set()
        self._old: set[bytes] = set()

    def __contains__(self, fp: bytes) -> bool:
        return fp in self._young or fp in self._old

    def add(self, fp: bytes) -> None:
        if self.size <= 0:
            return
        if len(self._young) >= self.size:
            self._old, self._young = self._young, set()
        self._young.add(fp)


class _Backoff:
    """Bounded exponential backoff for Redis errors: workers wait, not die."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.delay = 0.05

    def reset(self) -> None:
        self.delay = 0.05

    async def sleep(self, what: str, exc: Exception) -> None:
        logger.warning("Redis error in frontier %s (%s); retrying in %.2f s", what, exc, self.delay)
        await _wait(self.stop, self.delay)
        self.delay = min(self.delay * 2, REDIS_RETRY_MAX_SECONDS)


def _redacted(url: str) -> str:
    """A Redis URL without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


async def _wait(event: asyncio.Event, timeout: float) -> None:
    """Until ``event`` is set or ``timeout`` passes; cancellation always propagates
    (``asyncio.wait_for`` can swallow it in Python 3.11 when both race)."""
    if event.is_set():
        return
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait([waiter], timeout=timeout)
    finally:
        waiter.cancel()
