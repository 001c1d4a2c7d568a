"""The claim side of a worker: when to ask the frontier for more URLs, and the
small buffer of claimed requests the engine takes from.

At most ``CONCURRENT_REQUESTS`` + ``CRAWL_CLAIM_PREFETCH`` leases are in
flight, each for a host that is ready now, so the engine never gets a request
whose host must still wait, and a worker never hoards; the few beyond the
downloader's slots wait here, so that a slot freed by a response starts its
next fetch at once rather than after a claim round trip.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections import deque
from collections.abc import Collection
from typing import TYPE_CHECKING

from scrapy import Request, Spider

from crawlproject.frontier.admission.priority import SHARE_META_KEY
from crawlproject.frontier.basics.request_meta import LEASE_META_KEY
from crawlproject.frontier.claims.address_gate import open_gate
from crawlproject.frontier.claims.leases import LeaseBook
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.codec import RequestCodec, RequestDecodeError
from crawlproject.frontier.store.outbox import Outbox
from crawlproject.frontier.store.redis_frontier import Lease, RedisFrontier

if TYPE_CHECKING:
    from scrapy.core.engine import ExecutionEngine
    from scrapy.statscollectors import StatsCollector

    from crawlproject.frontier.claims.address_gate import AddressGate

logger = logging.getLogger(__name__)


# Shards known empty (no host claimable) re-asked per idle poll, oldest first:
# another worker's new URLs there are found within shards / PROBES_PER_POLL
# polls, at a cost per poll that does not grow with the shard count.
PROBES_PER_POLL = 8
RECLAIM_PARALLEL = 16  # reclaim calls in flight at once (one per shard)


class ClaimClock:
    """Which shards a claim asks, and when: per shard the loop time at which it
    has a host due (each claim's reply says), or that it had none (``empty``,
    then not asked again until this worker adds, frees a slot or reclaims
    there, or its turn among PROBES_PER_POLL per idle poll comes); overall,
    not before ``not_before`` (set when nothing was ready). ``event`` wakes
    the claim loop. A shard never asked is asked at once.

    A host this worker just fetched is asked for at once (:meth:`slot_freed`),
    while its release is still on its way to Redis: a claim that Redis runs
    first finds the host held and nothing else. Such a reply is not let stand
    (the shard would wait its probe's turn, up to shards / PROBES_PER_POLL idle
    polls): a reply with nothing that comes after this worker changed the shard
    (``changes``: a slot freed, an add, a reclaim) asks it again, and a shard
    found with nothing is asked again once a release there is in Redis
    (:meth:`released`)."""

    def __init__(self, poll: float = 0.5) -> None:
        self.event = asyncio.Event()
        self.poll = poll  # CRAWL_IDLE_POLL_SECONDS (ClaimBuffer sets it)
        self.not_before = 0.0  # loop time
        self.shard_ready: dict[int, float] = {}  # loop time at which a shard has a host due
        self.empty: dict[int, float] = {}  # shard -> loop time found empty, oldest first
        self.next_shard = 0
        self.next_probe = 0.0  # loop time of the next probe of empty shards
        self.changes: dict[int, int] = {}  # shard -> what this worker did there, counted
        self.found_none: set[int] = set()  # empty shards whose last claim got nothing
        # Loop time of the earliest host due that a wake named while a claim
        # round was on its way (see :meth:`round_wait`).
        self.woken_due = math.inf

    def wake(self) -> None:
        self.event.set()

    def mark(self, shard: int) -> int:
        """The shard's change count, taken when a claim is sent there."""
        return self.changes.get(shard, 0)

    def _changed(self, shard: int) -> None:
        self.changes[shard] = self.changes.get(shard, 0) + 1

    def released(self, shard: int, due: float) -> None:
        """A release of this worker in ``shard`` is in Redis: a claim that
        found the shard with nothing may have run before it."""
        self._changed(shard)
        if shard in self.found_none:
            self.slot_freed(shard, due)

    def slot_freed(self, shard: int, due: float) -> None:
        """A download slot of this worker is free again, and the host of
        ``shard`` is due again at about ``due``: look then, rather than at the
        next idle poll (which may be later)."""
        self.event.set()
        self._changed(shard)
        self.found_none.discard(shard)
        self.empty.pop(shard, None)
        if self.shard_ready.get(shard, 0.0) > due:
            self.shard_ready[shard] = due
        self.not_before = min(self.not_before, due)
        self.woken_due = min(self.woken_due, due)

    def new_urls(self, shards: Collection[int], now: float | None = None) -> None:
        """New URLs were added in ``shards``: an empty one may have a host due
        now; one whose next host is due later may have a new host due now,
        looked at within an idle poll (one call per shard and poll at most,
        however many adds)."""
        if now is None:
            now = asyncio.get_running_loop().time()
        for shard in shards:
            self._changed(shard)
            self.found_none.discard(shard)
            if self.empty.pop(shard, None) is not None:
                self.shard_ready[shard] = now
            elif self.shard_ready.get(shard, 0.0) > now + self.poll:
                self.shard_ready[shard] = now + self.poll
        self.not_before = 0.0
        self.woken_due = 0.0
        self.event.set()

    def shard_reclaimed(self, shard: int) -> None:
        self._changed(shard)
        self.found_none.discard(shard)
        self.empty.pop(shard, None)
        self.shard_ready.pop(shard, None)
        self.woken_due = 0.0
        self.event.set()

    def round_wait(self, wait: float, now: float) -> float:
        """The seconds until the next claim round, at most ``wait`` (what the
        round's replies said): sooner if a wake came while the round was on
        its way (the claim loop sets ``not_before`` from this after the
        round, which would otherwise undo that wake's). Starts the next."""
        woken, self.woken_due = self.woken_due, math.inf
        return max(0.0, min(wait, woken - now))

    def claimed(
        self,
        shard: int,
        next_ready: float | None,
        now: float,
        mark: int | None = None,
        got: int = 0,
    ) -> bool:
        """A claim's reply: ``got`` URLs, the shard's next host due at
        ``next_ready``, or none claimable (None). ``mark``: the shard's
        :meth:`mark` when the claim was sent. True if the reply is stale (it
        got nothing, and this worker changed the shard while it was on its
        way): the shard is due again now."""
        self.found_none.discard(shard)
        if not got and mark is not None and self.changes.get(shard, 0) != mark:
            self.empty.pop(shard, None)
            self.shard_ready[shard] = now
            return True
        if next_ready is None:
            self.shard_ready.pop(shard, None)
            self.empty.pop(shard, None)
            self.empty[shard] = now
            if not got:
                self.found_none.add(shard)
        else:
            self.shard_ready[shard] = next_ready
        return False

    def to_ask(self, shards: int, now: float) -> tuple[list[int], float]:
        """The shards to ask now, in turn from ``next_shard`` (then those known
        empty whose probe is due), and the seconds until another may be."""
        poll = wait = self.poll
        due: list[int] = []
        for i in range(shards):
            shard = (self.next_shard + i) % shards
            if shard in self.empty:
                continue
            at = self.shard_ready.get(shard, 0.0)
            if at > now:
                wait = min(wait, at - now)
            else:
                due.append(shard)
        if self.empty:  # oldest first (claimed() appends)
            at = max(self.next_probe, next(iter(self.empty.values())) + poll)
            if now >= at:
                self.next_probe = now + poll
                stale = now - poll
                probes = itertools.islice(self.empty.items(), PROBES_PER_POLL)
                due += [shard for shard, found in probes if found <= stale]
            else:
                wait = min(wait, at - now)
        return due, max(wait, 0.0)


class ClaimBuffer:
    """Claimed requests not yet handed to the engine (their leases are in the
    lease book from the moment they are claimed)."""

    def __init__(
        self,
        config: FrontierConfig,
        stats: StatsCollector,
        codec: RequestCodec,
        clock: ClaimClock,
        leases: LeaseBook,
        outbox: Outbox,
    ) -> None:
        self.config = config
        self.stats = stats
        self.codec = codec
        self.clock = clock
        clock.poll = config.idle_poll_seconds
        self.leases = leases
        self.outbox = outbox
        self._requests: deque[Request] = deque()
        # The claim's second step, a place at the host's address, if any
        # address is capped (address_gate.py): opened at the first claim.
        self.gate: AddressGate | None = None
        self._gate_opened = False
        self._next_reclaim = 0  # the shard the next reclaim turn starts at
        self._reclaimed_at: float | None = None  # loop time of the last turn

    def __len__(self) -> int:
        return len(self._requests)

    def pop(self) -> Request | None:
        return self._requests.popleft() if self._requests else None

    def clear(self) -> None:
        self._requests.clear()

    def while_paused(self, engine: ExecutionEngine | None) -> bool:
        """Whether the engine is paused (its spool full: store/backpressure.py,
        or an operator). A paused engine takes no requests, so the claimed ones
        waiting for it go back to their queues: held here, their hosts' slots
        would stop the whole fleet from fetching those hosts until it resumes."""
        if engine is None or not engine.paused:
            return False
        if self._requests:
            handed = len(self._requests)
            while self._requests:
                self.leases.handed_back(self._requests.popleft())
            logger.info("The engine is paused: handed %d claimed URL(s) back", handed)
        return True

    def drop(self, tokens: Collection[str]) -> None:
        """Drops the requests of leases this worker lost: another worker may
        have them by now, so those fetches must never start."""
        self._requests = deque(
            r for r in self._requests if r.meta.get(LEASE_META_KEY) not in tokens
        )

    async def reclaim(self, frontier: RedisFrontier) -> None:
        """Puts expired leases (any worker's) back in their queues, a URL
        reclaimed too often set aside as poison: at each call the shards due,
        so that every shard is covered once per lease_seconds / 3 (a third of
        them per call at least, all of them with short leases), whatever the
        shard count; RECLAIM_PARALLEL calls in flight."""
        shards = frontier.keys.shards
        now = asyncio.get_running_loop().time()
        cover = self.config.lease_seconds / 3
        elapsed = cover if self._reclaimed_at is None else now - self._reclaimed_at
        count = min(shards, max(1, math.ceil(shards * elapsed / max(cover, 1e-9))))
        self._reclaimed_at = now
        turn = [(self._next_reclaim + i) % shards for i in range(count)]
        self._next_reclaim = (self._next_reclaim + count) % shards
        for start in range(0, len(turn), RECLAIM_PARALLEL):
            part = turn[start : start + RECLAIM_PARALLEL]
            for shard, (reclaimed, poisoned) in zip(
                part, await asyncio.gather(*(frontier.reclaim(s) for s in part)), strict=True
            ):
                self._reclaimed(shard, reclaimed, poisoned)

    def _reclaimed(self, shard: int, reclaimed: int, poisoned: int) -> None:
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
            self.clock.shard_reclaimed(shard)

    async def claim_some(
        self, frontier: RedisFrontier, worker_id: str, want: int, spider: Spider | None
    ) -> tuple[int, float]:
        """Claims up to ``want`` across shards; returns (claimed, seconds until more)."""
        if not self._gate_opened:
            self._gate_opened = True
            gate = open_gate(self.config, frontier.redis, frontier.keys, self.stats, self.leases)
            self.gate = self.leases.places = gate
        claimed: list[tuple[Lease, Request]] = []
        self.clock.woken_due = math.inf  # wakes from now on
        try:
            wait = await self._claim(frontier, worker_id, want, spider, claimed)
        finally:
            # What was claimed before a failure is held: it goes on, or back.
            self.clock.next_shard = (self.clock.next_shard + 1) % frontier.keys.shards
            got = await self._admit(claimed) if claimed else 0
        return got, self.clock.round_wait(wait, asyncio.get_running_loop().time())

    async def _claim(
        self,
        frontier: RedisFrontier,
        worker_id: str,
        want: int,
        spider: Spider | None,
        claimed: list[tuple[Lease, Request]],
    ) -> float:
        loop = asyncio.get_running_loop()
        clock = self.clock
        shards, wait = clock.to_ask(frontier.keys.shards, loop.time())
        for shard in shards:
            if len(claimed) >= want:
                break
            mark = clock.mark(shard)
            batch = await frontier.claim(shard, want - len(claimed), worker_id)
            got = len(batch.items)
            if batch.next_ready_ms is None:
                if clock.claimed(shard, None, loop.time(), mark, got):
                    wait = 0.0
            else:
                ahead = max(0.0, (batch.next_ready_ms - batch.now_ms) / 1000)
                stale = clock.claimed(shard, loop.time() + ahead, loop.time(), mark, got)
                wait = 0.0 if stale else min(wait, ahead)
            for j, (lease, data) in enumerate(batch.items):
                share = batch.shares[j] if batch.shares else None
                request = self._accept(lease, data, share, spider)
                if request is not None:
                    claimed.append((lease, request))
        return wait

    async def _admit(self, claimed: list[tuple[Lease, Request]]) -> int:
        """Hands claimed requests to the engine's buffer, after the claim's
        second step (a place at each host's address) when addresses are
        capped; returns how many go to the engine (the others went back to
        their queues)."""
        if self.gate is None:
            self._requests.extend(request for _, request in claimed)
            return len(claimed)
        admitted = await self.gate.admit(claimed)
        for lease in admitted.sent_back:
            self.leases.forget(lease)
        for _, request, hold_seconds in admitted.given_back:
            self.leases.defer(request, hold_seconds)
        self._requests.extend(request for _, request in admitted.granted)
        return len(admitted.granted)

    def _accept(
        self, lease: Lease, data: bytes, share: float | None, spider: Spider | None
    ) -> Request | None:
        try:
            request = self.codec.decode(data, spider)
        except RequestDecodeError as exc:
            self.stats.inc_value("frontier/undecodable")
            logger.error(
                "Moved an undecodable frontier entry to the dead list (crawlproject "
                "dead --explain): %s",
                exc,
            )
            self.outbox.ack("dead", lease)
            return None
        self.leases.hold(lease, request)
        if share is not None:
            request.meta[SHARE_META_KEY] = share
        self.stats.inc_value("frontier/claims")
        return request
