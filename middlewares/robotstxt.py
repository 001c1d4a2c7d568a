"""robots.txt for the whole fleet (RFC 9309), through the frontier's politeness.

Replaces Scrapy's RobotsTxtMiddleware, which keeps a per-process cache that
never expires, fetches robots.txt outside the scheduler (outside any shared
politeness), reads a 503 as "allow everything" and ignores Crawl-delay.

For a request whose origin (``scheme://host:port``) has no fresh robots.txt:

1. Redis (``r:<origin>``, see crawlproject/frontier/store/keys.py) may have it;
   a bounded per-process cache sits in front.
2. Otherwise one worker of the fleet takes the fetch lock (``rl:<origin>``)
   and fetches robots.txt (crawlproject/robots/fetch.py) *with the slot the
   request holds* (the host's one politeness slot: no other request to that
   host is under way, and its delay has passed). The request itself then
   goes back to the head of its queue (``scheduler.defer``): the host's delay
   runs again from the robots.txt answer before any worker fetches it.
3. Requests of that origin elsewhere (in this worker or any other) wait for
   the stored result, polling Redis on the event loop, never blocking it.

The result's Crawl-delay (or Request-rate) becomes the host's delay in the
frontier, for every worker; its ``Sitemap:`` lines seed the frontier.
Disallowed requests raise :class:`RobotsForbidden` (``robotstxt/forbidden``).
A host whose robots.txt is unreachable (5xx, 429, a name that does not resolve,
a refused connection, a timeout) is fully disallowed: its URLs wait in their
queue while robots.txt is retried on a short schedule (``CRAWL_ROBOTS_RETRY_SECONDS``,
doubling; :class:`RobotsDeferred`); after ``CRAWL_ROBOTS_DEFER_RETRIES`` failures
in a row the host is set aside: its queue is parked with the reason (``robots_503``,
``dns``, ``connection_refused``, ``timeout``, ``no_answer``: ``crawlproject parked
--reasons``), and the claimed URL goes back to its queue, where the claim parks
it too. Nothing is lost, the crawl can end, ``--requeue`` tries the host again.
Stats ``robotstxt/parked_hosts``, ``robotstxt/parked_urls``; one WARNING per host.
A host whose robots.txt the private-address guard refuses (``middlewares/guard.py``:
the host's address is refused, so its pages are too) raises the guard's
``BlockedAddress`` for the request, and for those waiting on the same fetch;
nothing is stored. A robots.txt *redirect* to a refused address is a refused
request like any other ("unavailable").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from redis.exceptions import RedisError
from scrapy import Request
from scrapy.utils.httpobj import urlparse_cached

from crawlproject.component_off import switched_off
from crawlproject.frontier.basics.outcomes import Requeue
from crawlproject.frontier.basics.urls import DEFAULT_PORTS, origin_of
from crawlproject.frontier.scrapy_glue.frontier_lookup import frontier_of, require_frontier
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from crawlproject.limits import REDIRECT_STATUSES
from crawlproject.robots.config import RobotsConfig
from crawlproject.robots.errors import RobotsDeferred, RobotsForbidden, RobotsUnreachable
from crawlproject.robots.fetch import ROBOTS_META_KEY, Fetched, RobotsFetcher
from crawlproject.robots.policy import RobotsKind, RobotsRecord, RobotsRules, Verdict, next_record
from crawlproject.robots.store import RobotsStore
from middlewares.robots_sitemaps import SitemapSeeds

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

WAIT_POLL_MIN_SECONDS = 0.05
WAIT_POLL_MAX_SECONDS = 1.0
REDIS_ERROR_HOLD_SECONDS = 5.0
PARKED_REMEMBERED_MAX = 10_000  # hosts this worker set aside, for one WARNING each


class RobotsTxtMiddleware:
    def __init__(self, crawler: Crawler, config: RobotsConfig, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self.owner = uuid.uuid4().hex[:12]
        self.fetcher = RobotsFetcher(crawler, config, stats, REDIRECT_STATUSES)
        self._local: OrderedDict[str, RobotsRules] = OrderedDict()
        self._pending: dict[str, asyncio.Future[RobotsRules]] = {}
        self._store: RobotsStore | None = None
        self.sitemaps = SitemapSeeds(crawler, config, stats)
        self._parked: OrderedDict[str, None] = OrderedDict()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsTxtMiddleware:
        config = RobotsConfig.from_settings(crawler.settings)
        if not config.obey:
            why = "CRAWL_ROBOTS_OBEY is off"
            raise switched_off(cls, crawler.settings, why, "CRAWL_ROBOTS_OBEY")
        require_frontier(crawler)
        assert crawler.stats is not None
        return cls(crawler, config, crawler.stats)

    # -- the request path -----------------------------------------------------------

    async def process_request(self, request: Request) -> None:
        if request.meta.get(ROBOTS_META_KEY) or request.meta.get("dont_obey_robotstxt"):
            return None
        parts = urlparse_cached(request)
        try:
            port = parts.port
        except ValueError:
            return None  # the download fails on its own
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            return None
        if parts.path == "/robots.txt":
            return None  # always allowed (RFC 9309 2.2.2)
        origin = origin_of(parts.scheme, parts.hostname, port)
        scheduler = self._scheduler()
        fetched: Fetched | None = None
        rules = self._cached(origin)
        if rules is None:
            try:
                rules, fetched = await self._resolve(origin, request, scheduler)
            except RedisError as exc:
                self.stats.inc_value("robotstxt/redis_error")
                logger.warning("robots.txt of %s: Redis error (%s); URL deferred", origin, exc)
                raise RobotsDeferred(
                    "robots.txt state unavailable (Redis error)",
                    requeue=Requeue(hold_seconds=REDIS_ERROR_HOLD_SECONDS),
                ) from exc
        verdict = rules.verdict(request.url, _now_ms())
        if verdict is Verdict.FORBID:
            self.stats.inc_value("robotstxt/forbidden")
            logger.debug("Forbidden by robots.txt: %s", request.url)
            raise RobotsForbidden("Forbidden by robots.txt", unfetched=fetched is None)
        if verdict is Verdict.UNREACHABLE:
            await self._unreachable(scheduler, request, rules, fetched)
        if fetched is not None and scheduler.leases.holds_slot(request):
            # Its slot was used for robots.txt: fetched after the host's delay.
            raise RobotsDeferred(
                "slot used for robots.txt; URL requeued", requeue=self._requeue(scheduler, fetched)
            )
        return None

    async def _unreachable(
        self,
        scheduler: FrontierScheduler,
        request: Request,
        rules: RobotsRules,
        fetched: Fetched | None,
    ) -> None:
        record = rules.record
        holds_slot = scheduler.leases.holds_slot(request)
        if record.fails < self.config.defer_retries:
            hold = max(0.0, (record.expires_ms - _now_ms()) / 1000)
            if holds_slot:
                self.stats.inc_value("robotstxt/deferred")
                raise RobotsDeferred(
                    f"robots.txt unreachable; retried in {hold:.0f} s",
                    requeue=self._requeue(scheduler, fetched, hold),
                )
        elif holds_slot and await self._park(scheduler, request, record):
            # Back to its queue, whose host is parked now: the claim parks it.
            raise RobotsDeferred(
                f"robots.txt unreachable ({record.reason or 'no answer'}, {record.fails} "
                "failed fetches): host set aside",
                requeue=self._requeue(scheduler, fetched),
            )
        self.stats.inc_value("robotstxt/unreachable")
        logger.debug("robots.txt unreachable (%d failures): %s", record.fails, request.url)
        raise RobotsUnreachable(
            f"robots.txt unreachable ({record.fails} failed fetches)", unfetched=fetched is None
        )

    async def _park(
        self, scheduler: FrontierScheduler, request: Request, record: RobotsRecord
    ) -> bool:
        """Sets the host aside for the record's reason; False if Redis failed
        (the URL then fails as unreachable, as before parking existed)."""
        frontier = scheduler.frontier
        if frontier is None:
            return False
        pkey = scheduler.politeness_key(request.url)
        reason = record.reason or "no_answer"
        try:
            parked = await frontier.park_host(pkey, reason)
        except RedisError as exc:
            self.stats.inc_value("robotstxt/park_errors")
            logger.warning("Could not set %s aside (robots.txt unreachable): %s", pkey, exc)
            return False
        self.stats.inc_value("robotstxt/parked_urls", parked + 1)  # + the claimed URL
        if pkey not in self._parked:
            self.stats.inc_value("robotstxt/parked_hosts")
            logger.warning(
                "%s: robots.txt unreachable (%s) %d times in a row: host set aside, %d queued "
                "URL(s) parked (crawlproject parked --reasons; --requeue tries it again)",
                pkey,
                reason,
                record.fails,
                parked + 1,
            )
        self._parked[pkey] = None
        self._parked.move_to_end(pkey)
        if len(self._parked) > PARKED_REMEMBERED_MAX:
            self._parked.popitem(last=False)
        return True

    @staticmethod
    def _requeue(
        scheduler: FrontierScheduler, fetched: Fetched | None, hold: float = 0.0
    ) -> Requeue:
        """How the URL goes back (the lease path, LeaseBook.failed, defers it):
        after ``hold``, its host's delay running from the robots.txt answer."""
        if fetched is None:
            return Requeue(hold_seconds=hold)
        throttled = fetched.outcome.status in scheduler.config.backoff_http_codes
        return Requeue(hold, fetched.at, fetched.latency, throttled)

    # -- finding the rules ----------------------------------------------------------------

    def _scheduler(self) -> FrontierScheduler:
        return frontier_of(self.crawler)

    def allows(self, url: str) -> bool | None:
        """Whether robots.txt allows ``url``, from this worker's cache only
        (no fetch, no wait): None when its origin's rules are not cached.
        For requests a rendered page makes (middlewares/render_handler.py)."""
        rules = self._rules_of(url)
        if isinstance(rules, RobotsRules):
            return rules.verdict(url, _now_ms()) is Verdict.ALLOW
        return rules

    def forbids(self, url: str) -> bool:
        """Whether this worker's cached rules forbid ``url``: False when they are not
        cached, and for an unreachable robots.txt (its URLs wait; middlewares/robots_links.py)."""
        rules = self._rules_of(url)
        return isinstance(rules, RobotsRules) and rules.verdict(url, _now_ms()) is Verdict.FORBID

    def _rules_of(self, url: str) -> RobotsRules | bool | None:
        """The cached rules of ``url``'s origin; True for robots.txt itself; None if unknown."""
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            return None
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            return None
        if parts.path == "/robots.txt":
            return True
        return self._cached(origin_of(parts.scheme, parts.hostname, port))

    def _cached(self, origin: str) -> RobotsRules | None:
        rules = self._local.get(origin)
        if rules is None:
            return None
        if not rules.fresh(_now_ms()):
            del self._local[origin]
            return None
        self._local.move_to_end(origin)
        self.stats.inc_value("robotstxt/cache/local_hits")
        return rules

    def _remember(self, origin: str, record: RobotsRecord) -> RobotsRules:
        rules = RobotsRules(
            record, self.config.user_agent_token, round(self.config.outage_seconds * 1000)
        )
        if rules.parse_error is not None:
            self.stats.inc_value("robotstxt/parse_error")
            logger.warning("robots.txt of %s could not be parsed: %s", origin, rules.parse_error)
        self._local[origin] = rules
        self._local.move_to_end(origin)
        while len(self._local) > self.config.local_cache_size:
            self._local.popitem(last=False)
        return rules

    async def _resolve(
        self, origin: str, request: Request, scheduler: FrontierScheduler
    ) -> tuple[RobotsRules, Fetched | None]:
        """One lookup (or fetch) per origin in this process at a time."""
        pending = self._pending.get(origin)
        if pending is not None:
            self.stats.inc_value("robotstxt/waited_local")
            return await asyncio.shield(pending), None
        future: asyncio.Future[RobotsRules] = asyncio.get_running_loop().create_future()
        self._pending[origin] = future
        try:
            rules, fetched = await self._load_or_fetch(origin, request, scheduler)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # the waiters, if any, re-raise it
            raise
        finally:
            del self._pending[origin]
        future.set_result(rules)
        return rules, fetched

    async def _load_or_fetch(
        self, origin: str, request: Request, scheduler: FrontierScheduler
    ) -> tuple[RobotsRules, Fetched | None]:
        store = self._store_of(scheduler)
        pkey = scheduler.politeness_key(request.url)
        shard = store.keys.shard_of(pkey)
        poll = WAIT_POLL_MIN_SECONDS
        waited = False
        lock_ms = scheduler.config.lease_ms
        while True:
            # The record, and the lock if it is stale: read together, so the
            # record is the latest (records are only written under the lock).
            now = _now_ms()
            latest, locked = await store.get_or_lock(shard, origin, now, self.owner, lock_ms)
            if latest is not None and now < latest.expires_ms:
                self.stats.inc_value("robotstxt/cache/redis_hits")
                return self._remember(origin, latest), None
            if locked:
                done = asyncio.Event()
                keeper = asyncio.ensure_future(self._keep_lock(store, shard, origin, lock_ms, done))
                stored = False
                try:
                    fetched = await self.fetcher.fetch(origin, scheduler.config.host_delay_seconds)
                    record = next_record(latest, fetched.outcome, _now_ms(), self.config)
                    done.set()  # the keeper ends at its next turn, never cancelled mid-call
                    await keeper
                    await store.put_and_unlock(shard, origin, record, self.owner)
                    stored = True
                finally:
                    if not stored:
                        done.set()
                        await keeper
                        await store.unlock(shard, origin, self.owner)
                rules = self._remember(origin, record)
                await self._after_fetch(origin, pkey, rules, request, scheduler)
                return rules, fetched
            if not waited:
                waited = True
                self.stats.inc_value("robotstxt/waited")
            # Another worker is fetching it: its lock expires if it dies.
            await asyncio.sleep(poll)
            poll = min(poll * 2, WAIT_POLL_MAX_SECONDS)

    async def _keep_lock(
        self, store: RobotsStore, shard: int, origin: str, lock_ms: int, done: asyncio.Event
    ) -> None:
        """Renews the fetch lock like a lease, so a worker that dies mid-fetch
        holds up the others for at most one lease period."""
        while not done.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(done.wait(), lock_ms / 3000)
            if done.is_set():
                return
            try:
                await store.renew_lock(shard, origin, self.owner, lock_ms)
            except RedisError as exc:
                logger.warning("Could not renew the robots.txt lock of %s: %s", origin, exc)

    def _store_of(self, scheduler: FrontierScheduler) -> RobotsStore:
        if self._store is None:
            shared = scheduler.crawl_redis
            assert shared is not None, "the frontier opens before any request is downloaded"
            self._store = RobotsStore(
                shared.redis, shared.keys, round(self.config.outage_seconds * 1000)
            )
        return self._store

    async def _after_fetch(
        self,
        origin: str,
        pkey: str,
        rules: RobotsRules,
        request: Request,
        scheduler: FrontierScheduler,
    ) -> None:
        record = rules.record
        if record.kind is RobotsKind.UNREACHABLE:
            logger.info(
                "robots.txt of %s unreachable (status %d, failure %d): host disallowed, "
                "retried in %.0f s",
                origin,
                record.status,
                record.fails,
                (record.expires_ms - record.fetched_ms) / 1000,
            )
            return
        frontier = scheduler.frontier
        assert frontier is not None
        delay = rules.delay_seconds(self.config.crawl_delay_max_seconds)
        if delay is not None:
            self.stats.inc_value("robotstxt/crawl_delay_hosts")
            logger.debug("robots.txt of %s: Crawl-delay %.3f s", origin, delay)
        await frontier.set_robots_delay(pkey, None if delay is None else round(delay * 1000))
        self.sitemaps.seed(origin, rules, request)


def _now_ms() -> int:
    # Wall clock: records are shared by workers on many machines (TTL 24 h,
    # retries in minutes; clock skew of seconds does not matter).
    return int(time.time() * 1000)
