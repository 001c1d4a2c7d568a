"""The claim side of a worker: when to ask the frontier for more URLs, and the
small buffer of claimed requests the engine takes from.

At most ``CONCURRENT_REQUESTS`` + ``CRAWL_CLAIM_PREFETCH`` leases are in
flight, each for a host that is ready now, so the engine never gets a request
whose host must still wait, and a worker never hoards; the few beyond what
the downloader takes at once (``CONCURRENT_REQUESTS``) wait here, so that a
finished download starts the next fetch at once rather than after a claim
round trip.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Collection
from typing import TYPE_CHECKING

from scrapy import Request, Spider

from crawlproject.frontier.basics.request_meta import LEASE_META_KEY, SHARE_META_KEY
from crawlproject.frontier.claims.address_gate import open_gate
from crawlproject.frontier.claims.claim_clock import ClaimClock
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


RECLAIM_PARALLEL = 16  # reclaim calls in flight at once (one per shard)


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
            leases = self.leases
            gate = open_gate(
                self.config,
                frontier.redis,
                frontier.keys,
                self.stats,
                leases.clock,
                leases.release_event,
            )
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
