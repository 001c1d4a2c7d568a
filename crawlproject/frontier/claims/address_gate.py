"""The worker's side of politeness per server: the address step of a claim, and
the places at addresses this worker holds.

A claim is two atomic steps. claim.lua gives a URL its host slot on the host's
shard; then :meth:`AddressGate.admit` resolves the host (the reactor's resolver:
crawlproject/dns/resolver.py and its cache, the very answer the download will
connect to) and asks its address's home shard for a place
(address_take.lua). A URL without a place goes back to its queue unfetched
(address_wait.lua) and its host waits for its turn: hosts that find an address
full queue there first come, first served, and each place that frees is
reserved for the host waiting longest, which is woken (address_wake.lua), so
50 names of one server each get their turn. A place is held under its lease's
token and expires with it (renewed with the lease: :meth:`renew`), so a dead
worker's places come back with its leases. The lease book
(crawlproject/frontier/claims/leases.py) tells the gate when a fetch ended
(:meth:`send` with its releases) or a lease was dropped (:meth:`drop`).

Not capped (fetched with the host slot alone): a host whose name does not
resolve or resolves to an address the guard refuses (its download fails as it
always did, without contact: middlewares/dns.py parks hosts that never
resolve), and an address that ``CRAWL_ADDRESS_OVERRIDES`` leaves uncapped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from redis.exceptions import RedisError
from scrapy import Request
from scrapy.utils.httpobj import urlparse_cached

from crawlproject.frontier.basics.urls import domain_key, host_key
from crawlproject.frontier.claims.address_scripts import (
    NO_DELAY,
    AddressClient,
    AddressTiming,
    PlaceAsk,
    PlaceRelease,
    Wake,
)
from crawlproject.frontier.crawl.address_settings import AddressConfig, normal_address
from crawlproject.frontier.store.operation_values import Lease, Release

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from scrapy.statscollectors import StatsCollector

    from crawlproject.frontier.claims.claim_clock import ClaimClock
    from crawlproject.frontier.crawl.config import FrontierConfig
    from crawlproject.frontier.store.keys import CrawlKeys

logger = logging.getLogger(__name__)

Resolve = Callable[[str], Awaitable[str | None]]
# A woken host's place is kept this long past its time: its claim may wait on
# a worker's next claim round.
RESERVE_SECONDS = 5.0
# A name the resolver has not answered this soon does not hold up the batch
# (a lame delegation takes DNS_TIMEOUT, 60 s by default, and the worker
# would claim nothing meanwhile): its URLs go back unfetched, their host held
# RESOLVE_HOLD_SECONDS, while the lookup goes on and fills the resolver's
# cache for the host's next claim.
RESOLVE_WAIT_SECONDS = 0.5
RESOLVE_HOLD_SECONDS = 5.0
# A late answer is also kept here for the name's next claim (once), so that a
# host makes progress without the resolver's cache (DNSCACHE_ENABLED off);
# at most this many, the oldest dropped.
LATE_ANSWERS = 10_000


@dataclass(frozen=True, slots=True)
class Place:
    address: str
    cap: int


@dataclass(slots=True)
class Admitted:
    """What :meth:`AddressGate.admit` made of a batch of claimed URLs."""

    granted: list[tuple[Lease, Request]]  # fetch them (with a place, or uncapped)
    sent_back: list[Lease]  # back in their queues: forget their leases
    # Not decided (a Redis error, a name still resolving): defer(request, hold s).
    given_back: list[tuple[Lease, Request, float]]


class AddressGate:
    def __init__(
        self,
        config: AddressConfig,
        client: AddressClient,
        stats: StatsCollector,
        resolve: Resolve,
        pkey_of: Callable[[str], str],
        on_woken: Callable[[int], None],
        release_event: asyncio.Event,
    ) -> None:
        self.config = config
        self.client = client
        self.stats = stats
        self.resolve = resolve
        self.pkey_of = pkey_of
        self.on_woken = on_woken  # a shard whose hosts were woken: claim there soon
        self.release_event = release_event
        self._places: dict[str, Place] = {}  # lease token -> its place
        self._dropped: list[PlaceRelease] = []  # places to free with the next send
        self._lookups: set[asyncio.Future[str | None]] = set()  # slow ones, still going
        self._late: dict[str, str | None] = {}  # name -> a slow lookup's answer, used once

    def __len__(self) -> int:
        return len(self._places)

    def place_of(self, lease: Lease) -> Place | None:
        return self._places.get(lease.token)

    # -- the claim's second step -------------------------------------------------------

    async def admit(self, claimed: Sequence[tuple[Lease, Request]]) -> Admitted:
        """The claim's second step for a batch of claimed URLs (see the module
        docstring); the granted keep their claim order."""
        out = Admitted([], [], [])
        asks = await self._asks(claimed, out)
        granted = {lease.token for lease, _ in claimed} - {a.lease.token for a in asks}
        granted -= {lease.token for lease, _, _ in out.given_back}
        if asks:
            granted |= await self._take(asks, claimed, out)
        out.granted = [(lease, request) for lease, request in claimed if lease.token in granted]
        return out

    async def _asks(
        self, claimed: Sequence[tuple[Lease, Request]], out: Admitted
    ) -> list[PlaceAsk]:
        """A place to ask for each URL whose host resolves to a capped address;
        the URLs of a name still resolving go to ``out.given_back``."""
        names = {urlparse_cached(r).hostname or "" for _, r in claimed}
        if not names:
            return []
        lookups = {name: asyncio.ensure_future(self._address_of(name)) for name in names}
        _, slow = await asyncio.wait(lookups.values(), timeout=RESOLVE_WAIT_SECONDS)
        for name, lookup in lookups.items():
            if lookup in slow:  # not cancelled: its answer fills the resolver's cache
                self._lookups.add(lookup)
                lookup.add_done_callback(partial(self._answered_late, name))
        asks = []
        for lease, request in claimed:
            lookup = lookups[urlparse_cached(request).hostname or ""]
            if not lookup.done():
                self.stats.inc_value("frontier/address_resolving")
                out.given_back.append((lease, request, RESOLVE_HOLD_SECONDS))
                continue
            address = lookup.result()
            if address is None:
                self.stats.inc_value("frontier/address_unresolved")
                continue
            cap = self.config.cap_of(address)
            if cap is None:
                self.stats.inc_value("frontier/address_uncapped")
                continue
            try:
                pkey = self.pkey_of(request.url)
            except ValueError:  # (it was queued, so it has a host: never seen)
                self.stats.inc_value("frontier/address_unresolved")
                continue
            asks.append(PlaceAsk(lease, pkey, address, cap))
        return asks

    async def _take(
        self, asks: list[PlaceAsk], claimed: Sequence[tuple[Lease, Request]], out: Admitted
    ) -> set[str]:
        """Asks the places; the URLs refused go back (``out``). Returns the
        tokens of those granted."""
        requests = {lease.token: request for lease, request in claimed}
        try:
            waits, wakes = await self.client.take(asks)
        except RedisError as exc:
            logger.warning("Address places not reachable (%s): %d URL(s) back", exc, len(asks))
            out.given_back += [(a.lease, requests[a.lease.token], 1.0) for a in asks]
            return set()
        granted, denied = set(), []
        for ask, wait in zip(asks, waits, strict=True):
            if wait == 0:
                self._places[ask.lease.token] = Place(ask.address, ask.cap)
                granted.add(ask.lease.token)
            else:
                denied.append((ask.lease, wait))
        self.stats.inc_value("frontier/address_taken", len(granted))
        if denied:
            self.stats.inc_value("frontier/address_denied", len(denied))
            try:
                await self.client.wait(denied)
                out.sent_back += [lease for lease, _ in denied]
            except RedisError as exc:
                logger.warning("Could not send %d URL(s) back to wait: %s", len(denied), exc)
                out.given_back += [
                    (lease, requests[lease.token], wait / 1000) for lease, wait in denied
                ]
        await self._wake(wakes)
        return granted

    def _answered_late(self, name: str, lookup: asyncio.Future[str | None]) -> None:
        self._lookups.discard(lookup)
        if lookup.cancelled():  # the worker is closing
            return
        if len(self._late) >= LATE_ANSWERS:
            del self._late[next(iter(self._late))]
        self._late[name] = lookup.result()

    async def _address_of(self, name: str) -> str | None:
        literal = normal_address(name)
        if literal is not None or not name:
            return literal
        if name in self._late:
            return self._late.pop(name)
        try:
            address = await self.resolve(name)
        except Exception:  # never strand claimed leases: the download fails on its own
            logger.exception("Resolving %s for its address failed", name)
            return None
        return None if address is None else normal_address(address)

    async def _wake(self, wakes: Sequence[Wake]) -> None:
        if not wakes:
            return
        try:
            woken = await self.client.wake(wakes)
        except RedisError as exc:
            # Each host waits at most its block time, then asks again.
            logger.warning("Could not wake %d host(s) waiting on an address: %s", len(wakes), exc)
            return
        for shard, n in woken.items():
            if n:
                self.stats.inc_value("frontier/address_woken", n)
                self.on_woken(shard)

    # -- places end with their fetch --------------------------------------------------

    def drop(self, lease: Lease, contacted: bool = True) -> None:
        """``lease`` ended without a slot release (acknowledged, returned or lost
        while fetching): its place, if any, is freed with the next send."""
        place = self._places.pop(lease.token, None)
        if place is not None:
            flags = 0 if contacted else 4
            self._dropped.append(PlaceRelease(lease.token, place.address, place.cap, flags=flags))
            self.release_event.set()

    def drop_all(self) -> None:
        for token in list(self._places):
            self.drop(Lease.parse(token))

    async def send(self, releases: Sequence[Release]) -> None:
        """Frees the places of the leases whose slot releases were just sent
        (the same age, fetch time and flags: in address mode the address's own
        delay follows them), and those dropped."""
        batch, self._dropped = self._dropped, []
        for r in releases:
            place = self._places.pop(r.lease.token, None)
            if place is not None:
                batch.append(
                    PlaceRelease(
                        r.lease.token, place.address, place.cap,
                        r.age_ms, r.fetch_ms, r.hold_ms, r.flags,
                    )
                )  # fmt: skip
        if not batch:
            return
        try:
            wakes = await self.client.release(batch)
        except RedisError:
            self._dropped[:0] = batch  # tried again with the next send
            self.release_event.set()
            raise
        await self._wake(wakes)

    async def renew(self, held: set[str]) -> None:
        """Extends the places of leases still held; a place whose lease is not
        held any more is freed."""
        for token in [t for t in self._places if t not in held]:
            self.drop(Lease.parse(token))
        if not self._places:
            return
        lost = await self.client.renew([(p.address, t) for t, p in self._places.items()])
        if lost:
            # Expired while this worker stalled: the address counts it free again.
            self.stats.inc_value("frontier/address_places_lost", len(lost))
            for token in lost:
                self._places.pop(token, None)


async def resolve_with_reactor(name: str) -> str | None:
    """``name``'s address from the reactor's resolver (TWISTED_DNS_RESOLVER:
    crawlproject/dns/resolver.py, whose cache the download then hits); None if
    it does not resolve, or resolves to an address the guard refuses. The
    project's resolver answers its ``address_of`` without counting a cache
    hit as a download's (its dns/ stats stay per fetch)."""
    from scrapy.utils.defer import maybe_deferred_to_future
    from twisted.internet import reactor

    resolver = getattr(reactor, "resolver", None)
    lookup = getattr(resolver, "address_of", None) or getattr(resolver, "getHostByName", None)
    if lookup is None:
        return None
    try:
        return str(await maybe_deferred_to_future(lookup(name)))
    except Exception:  # DNSLookupError, the guard's refusal, a timeout: the fetch fails alone
        return None


def open_gate(
    config: FrontierConfig,
    redis: Redis,
    keys: CrawlKeys,
    stats: StatsCollector,
    clock: ClaimClock,
    release_event: asyncio.Event,
    resolve: Resolve = resolve_with_reactor,
) -> AddressGate | None:
    """The worker's gate when any address is capped (else None); a host's
    wake tells ``clock`` (the lease book's) that its shard has a free slot,
    and a freed place sets ``release_event`` (the lease book's)."""
    a = config.addresses
    if not a.enabled:
        return None
    timing = AddressTiming(
        lease_ms=config.lease_ms,
        reserve_ms=round(RESERVE_SECONDS * 1000),
        # A waiting host asks again after a lease's time if no wake came (lost
        # with a worker that died between freeing a place and waking it).
        block_ms=config.lease_ms,
        delay_ms=config.host_delay_ms if a.by_address else NO_DELAY,
        adaptive=config.adaptive,
        host_delay_ms=config.host_delay_ms,
        host_concurrency=config.host_concurrency,
    )
    loop = asyncio.get_running_loop()

    def on_woken(shard: int) -> None:
        clock.slot_freed(shard, loop.time())

    # The key a URL's host queue lives under (admission.py): its host part
    # alone decides it, so the stored URL gives it without canonicalizing.
    pkey_of = domain_key if config.politeness_key == "domain" else host_key
    logger.info(
        "Politeness per server: %s per address%s",
        f"{a.base_cap} place(s)" if a.base_cap else "no cap",
        ", the slot itself per address" if a.by_address else "",
    )
    client = AddressClient(redis, keys, timing)
    return AddressGate(a, client, stats, resolve, pkey_of, on_woken, release_event)
