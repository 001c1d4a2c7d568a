"""The lease book: every lease this worker holds, its state, and the lease API.

A claimed URL's lease goes FETCHING (it holds its host's politeness slot) ->
DOWNLOADED (the response or failure came back: the slot is released; the
downloader may still redirect or retry) -> SCRAPING (the spider has the
response; requests carrying its lease are its links) -> ended: acknowledged
(done, moved, returned) through the outbox, after the links its page produced,
or given back unfetched (``defer``). Slot releases go out at once, on their
own loop, never queued behind a batch of links.

Whatever the spider, every lease ends: one the ack middlewares did not end
(a failure without errback, raised in a downloader middleware's
``process_response`` or ``process_exception``, or an errback raising) is ended
when the engine is finished with the last request that carries it
(``request_ended``, wired by engine_hooks.py), counted in
``frontier/lease_ended/<state>``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from redis.exceptions import RedisError
from scrapy import Request
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

from crawlproject.frontier.basics.outcomes import NotFetched
from crawlproject.frontier.basics.request_meta import LEASE_META_KEY
from crawlproject.frontier.claims.retry_after import retry_after_seconds
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.outbox import Outbox
from crawlproject.frontier.store.redis_frontier import Lease, RedisFrontier, Release
from crawlproject.guard.errors import refusal_of

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from crawlproject.frontier.claims.address_gate import AddressGate
    from crawlproject.frontier.claims.claim_clock import ClaimClock

logger = logging.getLogger(__name__)


class LeaseState(enum.Enum):
    FETCHING = "fetching"  # holds its host slot
    DOWNLOADED = "downloaded"  # slot released; the downloader may still redirect/retry
    SCRAPING = "scraping"  # the spider has the response


# A lease the engine finished with, unended, by its state then: the stat's
# reason (frontier/lease_ended/<reason>) and its outcome (frontier/outcome/...).
ENDED_BY_ENGINE: dict[LeaseState, tuple[str, str]] = {
    LeaseState.FETCHING: ("not_downloaded", "failed"),  # failed before the download
    LeaseState.DOWNLOADED: ("failed", "failed"),  # a failure no ack or errback ended
    LeaseState.SCRAPING: ("unacked", "spider_error"),  # the spider had it, no ack came
}


@dataclass(slots=True)
class HeldLease:
    lease: Lease
    state: LeaseState
    url: str
    dont_filter: bool


class LeaseBook:
    def __init__(
        self,
        config: FrontierConfig,
        stats: StatsCollector,
        outbox: Outbox,
        clock: ClaimClock,
    ) -> None:
        self.config = config
        self.stats = stats
        self.outbox = outbox
        self.clock = clock
        self.release_event = asyncio.Event()  # wakes the release loop
        self._held: dict[str, HeldLease] = {}
        # (loop time of the response, its release): the host's delay runs from
        # the response; the release's age is filled in when it is sent.
        self._releases: list[tuple[float, Release]] = []
        self._sending = asyncio.Lock()  # held while a batch of releases is on its way
        outbox.before_acks = self.releases_before_acks
        # Places at addresses held by fetching leases (address_gate.py): freed
        # with their slot, or when a fetching lease ends otherwise.
        self.places: AddressGate | None = None

    # -- the book ----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, lease: Lease, request: Request, state: LeaseState = LeaseState.FETCHING) -> None:
        """Records a lease this worker now holds, carried by ``request``."""
        request.meta[LEASE_META_KEY] = lease.token
        self._held[lease.token] = HeldLease(lease, state, request.url, request.dont_filter)

    def state_of(self, request: Request) -> LeaseState | None:
        held = self._lookup(request)
        return None if held is None else held.state

    def leases(self) -> list[Lease]:
        return [h.lease for h in self._held.values()]

    def in_flight(self) -> int:
        return sum(1 for h in self._held.values() if h.state is LeaseState.FETCHING)

    def take_all(self) -> list[Lease]:
        """Every lease held, forgotten here (the worker is closing)."""
        leases = self.leases()
        self._held.clear()
        if self.places is not None:
            self.places.drop_all()
        return leases

    def forget(self, lease: Lease) -> None:
        """A lease given back by the frontier itself (its URL found no place
        at its address and went back to its queue: address_wait.lua)."""
        self._held.pop(lease.token, None)

    async def renew(self, frontier: RedisFrontier) -> set[str]:
        """Renews every lease held; drops (and returns the tokens of) those
        that expired before renewal: another worker may have them by now."""
        if not self._held:
            return set()
        answer = await frontier.renew(self.leases())
        # A lease ended here while the renewal was on its way (acked by the
        # write loop before the script ran) is gone from Redis too: not lost.
        lost = [lease for lease in answer if self._held.pop(lease.token, None) is not None]
        if self.places is not None:
            await self.places.renew(set(self._held))
        if lost:
            self.stats.inc_value("frontier/leases_lost", len(lost))
            logger.warning("%d lease(s) expired before renewal (worker stalled?)", len(lost))
        return {lease.token for lease in lost}

    def _lookup(self, request: Request) -> HeldLease | None:
        token = request.meta.get(LEASE_META_KEY)
        return self._held.get(token) if isinstance(token, str) else None

    # -- redirects and retries -------------------------------------------------------

    def take_parent(self, request: Request) -> tuple[str | None, HeldLease | None]:
        """Pops the lease token ``request`` carries; with it, the lease it takes
        over when it comes from the downloader (a redirect or a retry: the
        spider has not seen the lease yet), else None."""
        token = request.meta.pop(LEASE_META_KEY, None)
        held = self._held.get(token) if token else None
        parent = held if held is not None and held.state is not LeaseState.SCRAPING else None
        return token, parent

    def hand_over(self, token: str | None, parent: HeldLease | None) -> None:
        """The old lease of a redirect or retry is done once the new request is
        stored (the writer sends URLs before acknowledgements), or dropped."""
        if parent is None or token is None:
            return
        del self._held[token]
        self._drop_place(parent)
        self.outbox.ack("moved", parent.lease, wake=False)
        self.stats.inc_value("frontier/continuations")

    # -- slots ---------------------------------------------------------------------

    def holds_slot(self, request: Request) -> bool:
        """Whether ``request`` holds its host's politeness slot here (a claimed,
        not yet downloaded URL): what it does now counts as a contact with the host."""
        held = self._lookup(request)
        return held is not None and held.state is LeaseState.FETCHING

    def _end_fetch(self, request: Request) -> HeldLease | None:
        """The lease whose slot ``request`` held, now marked downloaded; None if
        it held none (not claimed here, or its fetch already ended)."""
        held = self._lookup(request)
        if held is None or held.state is not LeaseState.FETCHING:
            return None
        held.state = LeaseState.DOWNLOADED
        return held

    def downloaded(self, request: Request, response: Response | None = None) -> None:
        """The download of ``request`` ended (``response``, or a failure): its
        host slot is released, with the fetch time and any back-off."""
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
        at = asyncio.get_event_loop().time() if at is None else at
        self._releases.append((at, release))
        self.release_event.set()
        self.clock.slot_freed(release.lease.shard, self._due(at, release))

    def _due(self, at: float, release: Release) -> float:
        """About when the host is due again: a delay after its answer (``at``), or at
        once if the slot made no contact (release.lua frees it with no delay)."""
        delay = self.config.host_delay_seconds if release.contacted else 0.0
        return at + max(delay, release.hold_ms / 1000)

    def _drop_place(self, held: HeldLease) -> None:
        if self.places is not None and held.state is LeaseState.FETCHING:
            self.places.drop(held.lease)

    async def send_releases(self, frontier: RedisFrontier) -> None:
        async with self._sending:
            await self._send_releases(frontier)

    async def releases_before_acks(self, frontier: RedisFrontier) -> None:
        """The outbox awaits this before an ack call: the releases queued before are
        in Redis first. ack.lua frees a slot still held as a fetch's, one delay from
        then: an ack that overtook the release of a slot that made no contact
        (robots.txt forbade the URL) cost its host a whole delay (issue 43)."""
        if self._releases or self._sending.locked():
            async with self._sending:
                if self._releases:
                    await self._send_releases(frontier)

    async def _send_releases(self, frontier: RedisFrontier) -> None:
        if not self._releases:
            if self.places is not None:
                await self.places.send(())
            return
        batch, self._releases = self._releases, []
        now = asyncio.get_running_loop().time()
        # Each release says how long ago its response came: Redis starts the
        # host's delay then (its own clock minus that), not when the call lands.
        releases = [replace(r, age_ms=round((now - at) * 1000)) for at, r in batch]
        try:
            self.stats.inc_value("frontier/releases", await frontier.release(releases))
        except RedisError:
            self._releases[:0] = batch
            raise
        # In Redis now: a claim sent at the slot's release (slot_freed) may
        # have run first and found the host still held.
        for at, release in batch:
            self.clock.released(release.lease.shard, self._due(at, release))
        if self.places is not None:
            await self.places.send(releases)

    @property
    def pending_releases(self) -> list[Release]:
        """Slot releases not yet sent, in order (a copy)."""
        return [release for _, release in self._releases]

    # -- outcomes ---------------------------------------------------------------------

    def defer(
        self,
        request: Request,
        hold_seconds: float = 0.0,
        contacted_at: float | None = None,
        fetch_seconds: float | None = None,
        throttled: bool = False,
        stat: str = "frontier/deferred",
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
        self.stats.inc_value(stat)
        return True

    def release_unfetched(self, request: Request) -> None:
        """Frees the slot of a claimed URL that will not be fetched (e.g.
        robots.txt forbids it) and made no contact with its host, so the host's
        next URL need not wait a delay for it. The URL is then finished as usual."""
        held = self._end_fetch(request)
        if held is not None:
            self._queue_release(Release(held.lease, 0, contacted=False))

    def scraping(self, request: Request) -> None:
        """The spider got the response: requests carrying its lease are its links."""
        held = self._lookup(request)
        if held is not None:
            held.state = LeaseState.SCRAPING

    def done(self, request: Request, outcome: str) -> None:
        """The URL is finished (``outcome`` for the stats: scraped, failed, spider_error)."""
        self._end(request, "done", outcome)

    def returned(self, request: Request) -> None:
        """The URL was fetched but its item could not be saved (ItemNotSaved):
        back to the head of its host's queue, after the links its page
        produced (the writer sends URLs before acknowledgements)."""
        self._end(request, "return", "not_saved")

    def handed_back(self, request: Request) -> None:
        """A claimed URL the engine will not take for now (it is paused): back
        to the head of its host's queue, its host slot (and address place)
        freed at once, so that other workers may fetch the host meanwhile. The
        host was not contacted: no delay is charged for it."""
        self.defer(request, stat="frontier/outcome/handed_back")

    def _end(self, request: Request, ack_mode: str, outcome: str) -> None:
        token = request.meta.get(LEASE_META_KEY)
        held = self._held.pop(token, None) if isinstance(token, str) else None
        if held is None:
            return
        if held.state is LeaseState.FETCHING:
            self.clock.wake()
            self._drop_place(held)
        self.outbox.ack(ack_mode, held.lease)
        self.stats.inc_value(f"frontier/outcome/{outcome}")

    def request_ended(self, request: Request, in_engine: Collection[Request]) -> None:
        """The engine is finished with ``request``: its callback or errback, their
        output and items are through (engine_hooks.py). A lease it carries that
        nothing ended by now is ended here (done: Scrapy dropped the request),
        unless another request the engine still holds (``in_engine``) carries
        it: the last carrier ends it. A redirect or retry is no carrier: it was
        stored as a URL of its own (``hand_over``) before its parent ends."""
        token = request.meta.get(LEASE_META_KEY)
        held = self._held.get(token) if isinstance(token, str) else None
        if held is None:
            return  # the usual case: acked, handed over or given back already
        for other in in_engine:
            if other is not request and other.meta.get(LEASE_META_KEY) == token:
                return
        reason, outcome = ENDED_BY_ENGINE[held.state]
        self.stats.inc_value(f"frontier/lease_ended/{reason}")
        logger.debug("Lease of %s ended with its request (%s)", request.url, reason)
        self._end(request, "done", outcome)

    def failed(self, request: Request, exception: BaseException | None) -> None:
        """The one way a failed or refused download reaches its lease.

        Called by the ack downloader middleware's process_exception, which
        sees every exception from a download or a ``process_request``. One
        raised past it (in a middleware's process_response: a gzip bomb over
        DOWNLOAD_MAXSIZE, REDIRECT_MAX_TIMES used up) goes to the errback, if
        any: the lease then ends with its request (``request_ended``). What
        the refusing component said decides (crawlproject/frontier/basics/outcomes.py):
        a :class:`NotFetched` with ``requeue`` goes back to its queue (``defer``);
        one ``unfetched``, or a guard refusal (no contact with the host), frees
        its slot at once; the URL is then finished. Idempotent: a lease already
        finished or given back is not held any more and nothing happens; a lease
        the spider middleware has (an HttpError) is acked by it.
        """
        if isinstance(exception, NotFetched) and exception.requeue is not None:
            r = exception.requeue
            if self.defer(request, r.hold_seconds, r.contacted_at, r.fetch_seconds, r.throttled):
                return
        unfetched = isinstance(exception, NotFetched) and exception.unfetched
        if unfetched or refusal_of(exception, urlparse_cached(request).hostname) is not None:
            self.release_unfetched(request)
        held = self._lookup(request)
        if held is not None and held.state is not LeaseState.SCRAPING:
            self.done(request, "failed")
