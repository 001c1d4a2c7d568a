"""Which shards a worker's claim asks, and when (:class:`ClaimClock`): kept
apart from claims.py so that the lease book (leases.py) and the address gate
(address_gate.py), which tell it of freed slots, need not import the claim
buffer that holds them."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Collection

# Shards known empty (no host claimable) re-asked per idle poll, oldest first:
# another worker's new URLs there are found within shards / PROBES_PER_POLL
# polls, at a cost per poll that does not grow with the shard count.
PROBES_PER_POLL = 8


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
    found with nothing (whether or not another of its hosts is due later) is
    asked again once a release there is in Redis (:meth:`released`)."""

    def __init__(self, poll: float = 0.5) -> None:
        self.event = asyncio.Event()
        self.poll = poll  # CRAWL_IDLE_POLL_SECONDS (ClaimBuffer sets it)
        self.not_before = 0.0  # loop time
        self.shard_ready: dict[int, float] = {}  # loop time at which a shard has a host due
        self.empty: dict[int, float] = {}  # shard -> loop time found empty, oldest first
        self.next_shard = 0
        self.next_probe = 0.0  # loop time of the next probe of empty shards
        self.changes: dict[int, int] = {}  # shard -> what this worker did there, counted
        self.found_none: set[int] = set()  # shards whose last claim got nothing
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
        """A host's slot is free again (this worker released it, or its address
        woke the host), and the host of ``shard`` is due again at about ``due``:
        look then, rather than at the next idle poll (which may be later)."""
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
        else:
            self.shard_ready[shard] = next_ready
        if not got:
            # Asked again when a release here lands, even with another host due
            # later: a slot freed without contact (robots.txt forbade its URL) makes
            # its host due at once, and nothing else would look before that later
            # time (up to a delay: issue 43).
            self.found_none.add(shard)
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
