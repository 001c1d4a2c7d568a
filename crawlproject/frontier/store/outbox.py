"""What a worker still has to write to the frontier, and the order it goes in.

``enqueue_request`` only appends here; the scheduler's writer loop sends it
(:meth:`Outbox.write`): recrawl fetch states first (a page's next due time
never lags its ack), then new scope roots, new URLs and AOPIC credits, then
the acknowledgements queued after them (a lease is acked only once the links
its page produced are stored, so a worker that dies loses nothing). Whatever
a failed write did not send is kept, in order, for the next attempt; a batch
whose call failed is sent again as it was, under its call id (redis_frontier.py), so
the shards whose call ran answer their first reply and apply nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from crawlproject.frontier.store.operation_values import SCOPE_VOTE
from crawlproject.frontier.store.operator_scope import OperatorScope
from crawlproject.frontier.store.redis_frontier import (
    NO_VOTE,
    AddResult,
    Lease,
    NewEntry,
    RedisFrontier,
)
from crawlproject.frontier.store.replay import REPLAY_MARGIN_SECONDS, RecentAdds
from crawlproject.lua import CALL_IDS
from crawlproject.recrawl.store import RecrawlStore, StateWrite
from crawlproject.redis_calls import DEFAULT_OUTAGE_SECONDS

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

OUTBOX_FLUSH_ENTRIES = 1000  # flush early when this many URLs wait
SCOPE_MARKS_REMEMBERED = 100_000  # hosts marked in scope by this worker (cleared when full)
SWEEP_MIN_SECONDS = 5.0  # between budget sweeps the crawl's growing scope asks for
# done: finished here; moved: a redirect or retry took the URL over; dead:
# undecodable; return: its item could not be saved (ItemNotSaved), fetch it again.
ACK_MODES = ("done", "moved", "dead", "return")


class Outbox:
    def __init__(
        self,
        stats: StatsCollector,
        credit_mode: bool,
        outage_seconds: float = DEFAULT_OUTAGE_SECONDS,
    ) -> None:
        self.stats = stats
        self.credit_mode = credit_mode
        self.event = asyncio.Event()  # wakes the writer loop
        self.scope_roots: frozenset[str] = frozenset()  # the crawl's, as last seen
        self._new_scope: set[str] = set()
        self._entries: list[NewEntry] = []
        # AOPIC credit for URLs sent before: fingerprint -> (politeness key,
        # credit), summed until the next write (navigation links repeat on
        # every page of a site: one Redis update per URL and write, not per link).
        self._credits: dict[bytes, tuple[str, float]] = {}
        # (ack mode, lease), sent after the entries queued before them.
        self._acks: list[tuple[str, Lease]] = []
        # Recrawl fetch states (middlewares/recrawl.py), written before the
        # acks queued after them: a page's next due time never lags its ack.
        self._tracks: list[StateWrite] = []
        # Batches whose call failed, sent again first, as they were, under
        # their call ids: (call id, entries); (call id, ack mode, leases).
        self._resend_add: tuple[str, list[NewEntry]] | None = None
        self._resend_acks: list[tuple[str, str, list[Lease]]] = []
        # The operator's hosts (operator_scope.py): the hosts this worker marked
        # (the scope vote goes once per host), and whether the URLs waiting over
        # budget are to be looked at again (at start, when the scope grows).
        self.scope = OperatorScope()
        self._scope_marked: set[str] = set()
        self._sweep_due = True
        self._swept_at = 0.0
        # URLs added lately, added again if their shard's master changed (a failover
        # may have lost them): kept while a promotion can still be waited out.
        self.recent = RecentAdds(outage_seconds + REPLAY_MARGIN_SECONDS)
        # Awaited before the first ack call of a write: the lease book sends the slot
        # releases queued before (claims/leases.py, releases_before_acks).
        self.before_acks: Callable[[RedisFrontier], Awaitable[None]] | None = None

    def __bool__(self) -> bool:
        """Whether anything waits to be written."""
        return bool(
            self._entries
            or self._credits
            or self._acks
            or self._tracks
            or self._resend_add
            or self._resend_acks
        )

    @property
    def pending_acks(self) -> list[tuple[str, Lease]]:
        """The acknowledgements not yet sent, in order (a copy)."""
        failed = [(mode, lease) for _, mode, leases in self._resend_acks for lease in leases]
        return failed + self._acks

    @property
    def pending_entries(self) -> int:
        return len(self._entries) + (len(self._resend_add[1]) if self._resend_add else 0)

    def add(self, entry: NewEntry, flush: bool = True) -> None:
        """Queues ``entry``; with ``flush``, wakes the writer once many wait.
        The first URL of a host of the operator's scope carries the scope vote."""
        if (
            entry.vote == NO_VOTE
            and self.scope.active
            and entry.pkey not in self._scope_marked
            and self.scope.covers(entry.pkey)
        ):
            if len(self._scope_marked) >= SCOPE_MARKS_REMEMBERED:
                self._scope_marked.clear()  # forgetting one costs a vote sent again
            self._scope_marked.add(entry.pkey)
            entry = replace(entry, vote=SCOPE_VOTE)
        self._entries.append(entry)
        if flush and len(self._entries) >= OUTBOX_FLUSH_ENTRIES:
            self.event.set()

    def note_scope(self, root: str) -> None:
        if root not in self.scope_roots:
            self._new_scope.add(root)

    def see_scope(self, roots: set[str]) -> None:
        self.scope_roots = self.scope_roots | roots
        if self.scope.see(roots):
            self._sweep_due = True

    def watch_scope(self, spider: Any) -> None:
        """Reads what the spider's scope is (operator_scope.py)."""
        self.scope.watch(spider)
        self._sweep_due = True

    async def _sweep(self, frontier: RedisFrontier) -> None:
        """Lets in the URLs over budget that now fit (budgets.py): at start, a
        raised CRAWL_HOST_BUDGET; hosts that joined the operator's scope."""
        now = time.monotonic()
        if self._swept_at and now - self._swept_at < SWEEP_MIN_SECONDS:
            return
        self._swept_at = now
        released = await frontier.sweep_budgets(self.scope.covers)
        self._sweep_due = False
        if released:
            self.stats.inc_value("frontier/budget_released", released)
            logger.info(
                "Released %d URLs that waited over their host's budget (a raised "
                "CRAWL_HOST_BUDGET, or hosts now in the crawl's scope)",
                released,
            )

    def credit(self, pkey: str, fingerprint: bytes, credit: float) -> None:
        """AOPIC credit for a URL (summed with what waits for it already)."""
        if not self.credit_mode or credit <= 0:
            return
        pending = self._credits.get(fingerprint)
        if pending is not None:
            self.stats.inc_value("frontier/credits_merged")
            credit += pending[1]
        self._credits[fingerprint] = (pkey, credit)

    def ack(self, mode: str, lease: Lease, wake: bool = True) -> None:
        """Acknowledges ``lease`` after the entries queued before it."""
        self._acks.append((mode, lease))
        if wake:
            self.event.set()

    def track(self, write: StateWrite) -> None:
        self._tracks.append(write)
        self.event.set()

    async def write(
        self,
        frontier: RedisFrontier,
        recrawl: Callable[[], RecrawlStore],
        on_added: Callable[[Collection[int]], None],
        on_done: Callable[[int], None],
    ) -> None:
        """Recrawl states, new URLs, then the acknowledgements queued after them.

        ``on_added`` runs once new URLs are stored, with their shards (they may be ready now),
        ``on_done`` with the crawl-wide done count after each ack call."""
        if self._new_scope:
            roots, self._new_scope = self._new_scope, set()
            await frontier.add_scope(roots)
            self.see_scope(roots)
        if self._sweep_due:
            await self._sweep(frontier)
        if self._credits:  # after the URLs of this write, so a new URL gets its credit
            credits, self._credits = self._credits, {}
            self._entries += [
                NewEntry(pkey, fp, False, b"", credit, credit_only=True)
                for fp, (pkey, credit) in credits.items()
            ]
        if again := self.recent.changed(frontier):
            self.stats.inc_value("frontier/replayed_urls", len(again))
            if self.credit_mode:
                # AOPIC: a URL that survived would get its credit a second time (a seen
                # URL's credit raises it); one that was lost comes back at the least.
                again = [replace(e, score=0.0) for e in again]
            self._entries[:0] = again
        if not self:
            return
        entries, self._entries = self._entries, []
        acks, self._acks = self._acks, []
        tracks, self._tracks = self._tracks, []
        try:
            if tracks:
                await recrawl().write(tracks)
                self.stats.inc_value("recrawl/states_written", len(tracks))
                tracks = []
            if self._resend_add:
                await self._add(frontier, *self._resend_add, on_added)
            if entries:
                self._resend_add, entries = (CALL_IDS.new(), entries), []
                await self._add(frontier, *self._resend_add, on_added)
            if self.before_acks is not None and (acks or self._resend_acks):
                await self.before_acks(frontier)
            while self._resend_acks:
                await self._ack(frontier, *self._resend_acks[0], on_done)
            for mode in ACK_MODES:
                leases = [lease for m, lease in acks if m == mode]
                if not leases:
                    continue
                acks = [(m, lease) for m, lease in acks if m != mode]
                self._resend_acks.append((CALL_IDS.new(), mode, leases))
                await self._ack(frontier, *self._resend_acks[0], on_done)
        finally:
            # Whatever was not written is kept, in order, for the next attempt.
            self._entries[:0] = entries
            self._acks[:0] = acks
            self._tracks[:0] = tracks

    async def _add(
        self,
        frontier: RedisFrontier,
        call: str,
        entries: list[NewEntry],
        on_added: Callable[[Collection[int]], None],
    ) -> None:
        result = await frontier.add(entries, call)
        self._resend_add = None
        self.recent.note(frontier, entries)
        self.stats.inc_value("frontier/enqueued", result.added)
        self.stats.inc_value("frontier/seen_hits", result.seen_hits)
        self._count_caps(result)
        if result.added:
            on_added({frontier.keys.shard_of(e.pkey) for e in entries})

    async def _ack(
        self,
        frontier: RedisFrontier,
        call: str,
        mode: str,
        leases: list[Lease],
        on_done: Callable[[int], None],
    ) -> None:
        acked, missing = await frontier.ack(leases, mode, call)
        self._resend_acks.pop(0)
        on_done(sum(frontier.done_seen.values()))
        self.stats.inc_value("frontier/acks", acked)
        if missing:
            self.stats.inc_value("frontier/late_acks", missing)

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
