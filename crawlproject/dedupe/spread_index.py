"""The spread duplicate index: a batch of pages judged by single-slot calls.

Where each page's entries sit: crawlproject/dedupe/spread.py. A batch of
pages takes three round trips (four with originals recorded), each a
pipeline (redis-py's cluster pipeline sends each node its calls at once; one
server gets one pipeline):

1. the near lookups: per near-table part, one call (lua/spread_lookup.lua) for
   the batch's SimHashes that fall in it, read-only;
2. the exact check and add: per exact part, one call (lua/spread_exact.lua),
   atomic on the digest's slot, pages in batch order: a body already there is
   an exact copy; else a page with a near copy (step 1, or an earlier page of
   the batch) is near and not stored; else the page is new and its digest
   stored. Of two copies of one body exactly one is new;
3. with originals recorded, the new pages' URLs (HSETNX) and the
   duplicates' originals (HGET); then in one round trip, for the new pages,
   their SimHash into every table's part (lua/spread_add.lua, which adds a
   SimHash once however often it is sent) and, for every page, its host's
   streak and the counters (lua/spread_tally.lua): a duplicate whose
   original is its own URL (a recheck) is tallied as kind 3, which counts
   nothing.

A page is judged near only if a stored page is within k bits, and stored
only if new: two near copies judged at the same moment may both be kept,
never neither. What each round trip sends again when the cluster changes,
and what fails instead: crawlproject/dedupe/calls.py. A failure of step 1 or
2 is raised (a RedisError: the caller keeps the page); one of step 3 is
counted in ``failed`` and logged, the verdicts returned: a page new in step 2
whose step 3 failed is kept but may be missing from some tables (a later near
copy may then be kept too), its host's streak and the counters may miss it.
A part over its load is split (lua/spread_split.lua) after the batch, by
whichever worker saw it due first.

Every call declares every key it touches: the part's state and, per page,
its bucket at the level the worker assumed and the next (the split pointer,
read in the script, picks one). A worker that assumed another level (the part
grew since it last saw it) gets the part's level back, nothing done, and sends
that call again.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from crawlproject.dedupe.calls import Call, load_script, send_calls
from crawlproject.dedupe.spread import (
    EXACT,
    Spread,
    bucket_key,
    state_key,
)
from crawlproject.dedupe.spread_pages import (
    SAME_URL,
    UNRECORDED,
    Page,
    near_in_batch,
    originals_calls,
    settle_unrecorded,
    take_originals,
)

logger = logging.getLogger(__name__)

STALE_LEVEL_ROUNDS = 4  # a part grows one level per doubling: one resend at most, in practice
SPLITS_PER_BATCH = 64  # splits left over wait for the part's next insert


class SpreadIndex:
    """The spread index of one crawl, seen from one worker."""

    def __init__(
        self, redis: Redis, spread: Spread, features_version: int, record_originals: bool
    ) -> None:
        self.redis = redis
        self.spread = spread
        self.record_originals = record_originals
        self.signature = spread.signature(features_version)
        self._levels: dict[str, int] = {}  # a part's state key -> its level last seen
        # Parts to split: state key -> (prefix, family, L, s).
        self._due: dict[str, tuple[str, str, int, int]] = {}
        # Calls that failed after the verdicts were known, by what they stored.
        self.failed: Counter[str] = Counter()
        # Each table's filter (NearTable.filter, a loop over its bits), once.
        self._filters = tuple(table.filter for table in spread.tables)
        self._scripts = {
            name: load_script(redis, f"spread_{name}")
            for name in ("lookup", "exact", "add", "split", "tally")
        }

    # -- the round trips ---------------------------------------------------------------

    async def _send(self, calls: Sequence[Call], raise_errors: bool = True) -> list[Any]:
        return await send_calls(self.redis, calls, raise_errors)

    async def _send_leveled(
        self,
        parts: Mapping[tuple[str, int], Any],
        build: Callable[..., tuple[Call, list[str]]],
        along: Sequence[Call] = (),
        along_replies: list[Any] | None = None,
    ) -> dict[tuple[str, int], Any]:
        """Sends ``build(family, part, items)`` (a call and the states it
        assumed levels of) for each part; a call answered {-1, L1, ...} (a
        table at another level than assumed: nothing done) is sent again at
        those levels. Returns part -> reply. ``along``: other calls sent in
        the first round trip (one fewer a batch), each reply or error put in
        ``along_replies`` before an error of the part's calls is raised."""
        out: dict[tuple[str, int], Any] = {}
        todo = list(parts)
        for _ in range(STALE_LEVEL_ROUNDS):
            built = [build(f, p, parts[(f, p)]) for f, p in todo]
            calls = [call for call, _ in built]
            if along:
                replies = await self._send([*calls, *along], raise_errors=False)
                assert along_replies is not None
                along_replies[:] = replies[len(calls) :]
                replies, along = replies[: len(calls)], ()
                for reply in replies:
                    if isinstance(reply, BaseException):
                        raise reply
            else:
                replies = await self._send(calls)
            again = []
            for where, (_, states), reply in zip(todo, built, replies, strict=True):
                if int(reply[0]) == -1:
                    for state, level in zip(states, reply[1:], strict=True):
                        self._levels[state] = int(level)
                    again.append(where)
                else:
                    out[where] = reply
            if not again:
                return out
            todo = again
        raise ResponseError(f"dedupe index: the level of {len(todo)} parts kept moving")

    def _level(self, state: str, first: int) -> int:
        return self._levels.get(state, first)

    def _near_call(
        self, family: str, part: int, items: list[tuple[Page, int, int]], first_arg: Any
    ) -> tuple[str, list[str], int, list[Any]]:
        """What a call to a near group's part declares and sends for ``items``
        (page, table, key): its state, then per item the two buckets; the
        level assumed; per item ``first_arg(table)``, its bucket number at that
        level and its SimHash. Returns (state, keys, level, item args)."""
        sp = self.spread
        prefix = sp.prefix(family, part)
        state = state_key(prefix)
        level = self._level(state, sp.near_min())
        keys, args = [state], []
        for page, t, key in items:
            low, high = key % (1 << level), key % (1 << (level + 1))
            keys += [bucket_key(prefix, t, low), bucket_key(prefix, t, high)]
            args += [first_arg(t), low, page.sim8]
        return state, keys, level, args

    def _note_due(self, state: str, prefix: str, family: str, level: int, split: int) -> None:
        self._due[state] = (prefix, family, level, split)

    # -- a batch ----------------------------------------------------------------------

    async def check_many(self, batch: Sequence[tuple[bytes, int | None, str, str]]) -> list[Page]:
        pages = [Page(*p) for p in batch]
        for page in pages:
            if page.simhash is not None:
                page.sim8 = page.simhash.to_bytes(8, "big")
        await self._lookup(pages)
        near_in_batch(pages, self.spread.k)
        await self._exact(pages)
        # The verdicts are known now: what fails after this is counted and
        # logged, not raised (the pages are judged right; only their later
        # near copies may be missed, a host's streak under-counted).
        await self._store_and_tally(pages)
        try:
            await self._split()
        except RedisError as exc:
            self._failed("split", 1, exc)  # the part says it is due again on its next insert
        return pages

    def take_failures(self) -> Counter[str]:
        """The calls that failed after their verdicts since last asked, by what
        they stored (then forgotten here: the caller counts them)."""
        failed, self.failed = self.failed, Counter()
        return failed

    def _failed(self, what: str, calls: int, exc: BaseException) -> None:
        self.failed[what] += calls
        logger.warning(
            "Duplicate index: %d %s calls failed after the verdicts (%s: %s); verdicts kept",
            calls,
            what,
            type(exc).__name__,
            exc,
        )

    def _near_items(self, pages: list[Page]) -> dict[tuple[str, int], list[tuple[Page, int, int]]]:
        """(near group, part) -> its (page, table, key), for pages with a SimHash."""
        sp = self.spread
        items: dict[tuple[str, int], list[tuple[Page, int, int]]] = defaultdict(list)
        for page in pages:
            if page.simhash is None:
                continue
            for t in range(len(sp.tables)):
                part, key = sp.near_part(t, page.simhash)
                items[(sp.near_family(t), part)].append((page, t, key))
        return items

    async def _lookup(self, pages: list[Page]) -> None:
        sp = self.spread
        queries = self._near_items(pages)
        if not queries:
            return
        filters = self._filters

        def build(
            family: str, part: int, items: list[tuple[Page, int, int]]
        ) -> tuple[Call, list[str]]:
            state, keys, level, args = self._near_call(family, part, items, filters.__getitem__)
            head: list[Any] = [sp.k, level, sp.near_min()]
            return Call(self._scripts["lookup"], keys, head + args, resend=True), [state]

        replies = await self._send_leveled(queries, build)
        for where, items in queries.items():
            reply = replies[where]
            self._levels[state_key(sp.prefix(*where))] = int(reply[1])
            for n, (page, _, _) in enumerate(items):
                distance, fp = int(reply[3 + 2 * n]), reply[4 + 2 * n]
                if distance >= 0 and (page.near < 0 or distance < page.near):
                    page.near, page.near_fp = distance, fp

    async def _exact(self, pages: list[Page]) -> None:
        sp = self.spread
        by_part: dict[tuple[str, int], list[tuple[Page, int, bytes]]] = defaultdict(list)
        for page in pages:
            part, x, entry = sp.exact_part(page.digest)
            by_part[(EXACT, part)].append((page, x, entry))

        def build(
            family: str, part: int, items: list[tuple[Page, int, bytes]]
        ) -> tuple[Call, list[str]]:
            prefix = sp.prefix(family, part)
            state = state_key(prefix)
            level = self._level(state, sp.exact_min())
            keys = [state]
            args: list[Any] = [level, sp.exact_min(), sp.exact_max(), sp.load, self.signature]
            for page, x, entry in items:
                low, high = x % (1 << level), x % (1 << (level + 1))
                keys += [bucket_key(prefix, None, low), bucket_key(prefix, None, high)]
                args += [low, entry, 1 if page.near >= 0 else 0]
            # Never sent again once it may have run: it would find the page's
            # own digest and judge the page a copy of itself (calls.py).
            return Call(self._scripts["exact"], keys, args), [state]

        replies = await self._send_leveled(by_part, build)
        for (family, part), items in by_part.items():
            reply = replies[(family, part)]
            prefix = sp.prefix(family, part)
            self._levels[state_key(prefix)] = int(reply[1])
            if int(reply[3]):
                self._note_due(state_key(prefix), prefix, family, int(reply[1]), int(reply[2]))
            for n, (page, _, _) in enumerate(items):
                page.kind = int(reply[4 + n])

    async def _store_and_tally(self, pages: list[Page]) -> None:
        sp = self.spread
        plain, lookups = originals_calls(sp, pages) if self.record_originals else ([], [])
        if plain:
            # First (a duplicate of a page of this batch finds its URL; a near
            # copy found once the inserts below land finds it too), and before
            # the tally: a duplicate whose original is its own URL (a recheck:
            # a recrawl, or a worker that died after judging it) is no copy,
            # tallied as kind 3 (nothing counted, its host's streak left).
            replies = await self._send(plain, raise_errors=False)
            if errors := take_originals(replies, lookups):
                self._failed("originals", len(errors), errors[0])
        unrecorded = [page for page in pages if page.kind == UNRECORDED]
        if unrecorded and (errors := await settle_unrecorded(sp, unrecorded, self._send)):
            self._failed("originals", len(errors), errors[0])
        for page in pages:
            if page.kind in (1, 2) and page.original == page.url:
                page.kind = SAME_URL
        adds = self._near_items([page for page in pages if page.kind in (0, UNRECORDED)])
        tallies: dict[int, list[Page]] = defaultdict(list)
        for page in pages:
            tallies[sp.host_part(page.host)].append(page)
        calls = []
        for part, items in tallies.items():
            keys = [sp.streak_key(part), sp.counters_key(part)]
            args = [
                value
                for page in items
                for value in (page.host, 0 if page.kind == UNRECORDED else page.kind)
            ]
            calls.append(Call(self._scripts["tally"], keys, args))
        # A tally that may have run is not sent again (its counters would
        # count twice): failed, it is counted in ``failed``. The new pages'
        # SimHashes go in the same round trip.
        tallied: list[Any] = [RedisError("not sent")] * len(calls)  # until answered
        if adds:
            await self._add_counting(adds, calls, tallied)
        else:
            tallied = await self._send(calls, raise_errors=False)
        if errors := [r for r in tallied if isinstance(r, RedisError)]:
            self._failed("tally", len(errors), errors[0])
        for (_, items), reply in zip(tallies.items(), tallied, strict=True):
            if isinstance(reply, RedisError):
                continue  # streaks unknown: 0
            for page, streak in zip(items, reply, strict=True):
                page.streak = int(streak)

    async def _add_counting(
        self,
        adds: dict[tuple[str, int], list[tuple[Page, int, int]]],
        along: Sequence[Call],
        along_replies: list[Any],
    ) -> None:
        try:
            await self._add(adds, along, along_replies)
        except RedisError as exc:
            self._failed("near insert", len(adds), exc)

    async def _add(
        self,
        adds: dict[tuple[str, int], list[tuple[Page, int, int]]],
        along: Sequence[Call] = (),
        along_replies: list[Any] | None = None,
    ) -> None:
        sp = self.spread

        def build(
            family: str, part: int, items: list[tuple[Page, int, int]]
        ) -> tuple[Call, list[str]]:
            first = sp.group_tables(family)[0]  # its entries count the part's pages
            count = lambda t: 1 if t == first else 0  # noqa: E731
            state, keys, level, args = self._near_call(family, part, items, count)
            head: list[Any] = [sp.load, level, sp.near_min(), sp.group_max(family)]
            return Call(self._scripts["add"], keys, head + args, resend=True), [state]

        replies = await self._send_leveled(adds, build, along, along_replies)
        for (family, part), reply in replies.items():
            prefix = sp.prefix(family, part)
            level, split, due = (int(v) for v in reply[1:4])
            self._levels[state_key(prefix)] = level
            if due:
                self._note_due(state_key(prefix), prefix, family, level, split)

    async def _split(self) -> None:
        """Splits the parts seen over their load (a near group's part: all its
        tables at once), one bucket a call, until none is due (at most
        SPLITS_PER_BATCH rounds: the rest wait for the part's next insert to
        say so again)."""
        sp = self.spread
        for _ in range(SPLITS_PER_BATCH):
            if not self._due:
                return
            due, self._due = self._due, {}
            calls, parts = [], []
            for state, (prefix, family, level, split) in due.items():
                bits: list[int] = []
                tables: list[int | None] = []
                if family == EXACT:
                    first, last = sp.exact_min(), sp.exact_max()
                    tables.append(None)
                    bits += sp.exact_split_bit(level)
                else:
                    first, last = sp.near_min(), sp.group_max(family)
                    if level >= last:
                        continue
                    for t in sp.group_tables(family):
                        tables.append(t)
                        bits += sp.near_split_bit(t, level)
                keys = [state]
                for table in tables:
                    keys += [
                        bucket_key(prefix, table, split),
                        bucket_key(prefix, table, split + (1 << level)),
                    ]
                args = [level, split, first, last, sp.load, *bits]
                calls.append(Call(self._scripts["split"], keys, args, resend=True))
                parts.append((state, prefix, family))
            if not calls:
                return
            for (state, prefix, family), reply in zip(parts, await self._send(calls), strict=True):
                level, split, again = (int(v) for v in reply[:3])
                self._levels[state] = level
                if again:
                    self._note_due(state, prefix, family, level, split)
