"""Async operations on the shared frontier: one atomic Lua script each.

The key schema is documented in :mod:`crawlproject.frontier.store.keys`. Every call
here is a coroutine on redis-py's asyncio client, so nothing blocks Scrapy's
reactor (the asyncio reactor is Scrapy's default).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from crawlproject.frontier.store.budgets import OverBudget
from crawlproject.frontier.store.codec import whole_form
from crawlproject.frontier.store.crawl_layout import prepare_layout
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import (
    NO_PATTERN,
    NO_VOTE,
    SEED_VOTE,
    AdaptiveDelay,
    AddResult,
    ClaimBatch,
    FrontierMismatch,
    HostBudget,
    Lease,
    NewEntry,
    Release,
)
from crawlproject.frontier.store.parking import ParkedUrls
from crawlproject.frontier.store.script_replies import (
    group_by_shard,
    host_and_shape,
    reply_lines,
    reply_text,
)
from crawlproject.frontier.store.scripts import FRONTIER_SCRIPTS, load_lua
from crawlproject.frontier.store.seen_set import SeenFilter
from crawlproject.lua import CALL_IDS, once_per_call
from crawlproject.redis_calls import call_reply_ms, evalsha_many, register_script

ADD_CHUNK = 500  # URLs per add call: bounds one script's run time
RECLAIM_BATCH = 500
PRIORITY_MODES = ("score", "credit")

# The values the operations take and return live in operation_values.py (re-exported).
__all__ = [
    "NO_PATTERN",
    "NO_VOTE",
    "SEED_VOTE",
    "AdaptiveDelay",
    "AddResult",
    "ClaimBatch",
    "FrontierMismatch",
    "HostBudget",
    "Lease",
    "NewEntry",
    "RedisFrontier",
    "Release",
]


class RedisFrontier(ParkedUrls, OverBudget):
    """The frontier of one crawl, seen from one worker (or a CLI); its
    operations on set-aside URLs are in parking.py, on URLs over budget in
    budgets.py."""

    def __init__(
        self,
        redis: Redis,
        keys: CrawlKeys,
        default_delay_ms: int,
        default_concurrency: int,
        lease_ms: int,
        adaptive: AdaptiveDelay | None = None,
        priority_mode: str = "score",
        aopic_tax: float = 0.1,
        host_url_cap: int = 0,
        pattern_url_cap: int = 0,
        max_reclaims: int = 0,
        budget: HostBudget | None = None,
        seen: SeenFilter | None = None,
    ) -> None:
        if priority_mode not in PRIORITY_MODES:
            raise ValueError(
                f"priority mode must be one of {PRIORITY_MODES}, not {priority_mode!r}"
            )
        self.redis = redis
        self.keys = keys
        self.default_delay_ms = default_delay_ms
        self.default_concurrency = default_concurrency
        self.lease_ms = lease_ms
        self.adaptive = adaptive or AdaptiveDelay()
        self.priority_mode = priority_mode
        self.aopic_tax = aopic_tax
        self.host_url_cap = host_url_cap
        self.pattern_url_cap = pattern_url_cap
        self.budget = budget or HostBudget()
        self.seen = seen or SeenFilter()  # CRAWL_SEEN_FILTER (seen_set.py)
        self._seen_arg = self.seen.script_arg(keys.shards)
        # Reclaims of one URL before it is set aside as poison (0: no limit).
        self.max_reclaims = max_reclaims
        # Shard -> its ``done`` counter as of this client's last ack there.
        self.done_seen: dict[int, int] = {}
        reply_ms = call_reply_ms(redis)
        self._scripts: dict[str, AsyncScript] = {
            name: register_script(redis, once_per_call(load_lua(name), reply_ms))
            for name in FRONTIER_SCRIPTS
        }
        self._trim_start_urls = redis.register_script(load_lua("trim_start_urls", False))

    # -- layout -----------------------------------------------------------------

    async def prepare(self) -> None:
        """Records the crawl's fixed layout, or checks it against ours (crawl_layout.py)."""
        await prepare_layout(self.redis, self.keys, self.priority_mode, self.seen)

    def _args(self, shard: int, *rest: Any) -> list[Any]:
        return [self.keys.shard_prefixes[shard], *rest]

    def _keys(self, shard: int, call: str) -> list[str]:
        """A script's KEYS on ``shard`` for call id ``call`` (lua.py once_per_call)."""
        return [*self.keys.script_keys(shard), self.keys.call_reply(shard, call)]

    async def _run(self, name: str, shard: int, *args: Any) -> Any:
        """One call, under a call id of its own (its resend by redis-py answers once)."""
        return await self._scripts[name](
            keys=self._keys(shard, CALL_IDS.new()), args=self._args(shard, *args)
        )

    # -- URLs in ------------------------------------------------------------------

    async def _pipelined(
        self, name: str, calls: list[tuple[int, list[Any]]], call: str | None = None
    ) -> list[Any]:
        """One script run per (shard, args), all in one round trip; the i-th
        under call id ``<call>.<i>`` (a fresh ``call`` if None): the same
        calls sent again under the same ``call`` answer their first replies.

        redis-py's pipeline sends SCRIPT EXISTS before every execute when it
        carries registered scripts; plain EVALSHA avoids that round trip, and
        a server that lost its scripts (restart, SCRIPT FLUSH) gets them again.
        """
        script = self._scripts[name]
        call = call or CALL_IDS.new()
        runs = [
            (script.sha, self._keys(shard, f"{call}.{i:x}"), self._args(shard, *args))
            for i, (shard, args) in enumerate(calls)
        ]
        return await evalsha_many(self.redis, runs)  # loads a lost script again

    async def add(self, entries: Iterable[NewEntry], call: str | None = None) -> AddResult:
        """Queues ``entries``. Sent again under the same ``call`` (the outbox's
        failed batch), a shard's call that ran answers its first reply."""
        # Per shard, per host (in first-seen order): add.lua reads a host's
        # state once and pushes its URLs in one call per band.
        by_shard: dict[int, dict[str, list[bytes]]] = defaultdict(dict)
        for e in entries:
            hosts = by_shard[self.keys.shard_of(e.pkey)]
            packed = hosts.get(e.pkey)
            if packed is None:
                packed = hosts[e.pkey] = []
            packed.append(e.packed())
        calls: list[tuple[int, list[Any]]] = []
        head = [
            self.default_delay_ms,
            self.default_concurrency,
            self._seen_arg,
            self.host_url_cap,
            self.pattern_url_cap,
            self.budget.base,
            self.budget.seed_votes,
            self.budget.token_urls,
            self.budget.token_repeat_permille,
        ]
        for shard, hosts in by_shard.items():
            args: list[Any] = []
            n = 0
            for pkey, packed in hosts.items():
                for start in range(0, len(packed), ADD_CHUNK):
                    part = packed[start : start + ADD_CHUNK]
                    args += [pkey, len(part), *part]
                    n += len(part)
                    if n >= ADD_CHUNK:
                        calls.append((shard, [*head, *args]))
                        args, n = [], 0
            if args:
                calls.append((shard, [*head, *args]))
        totals = [0] * 12
        lines: list[list[str]] = [[] for _ in range(12)]
        for out in await self._pipelined("add", calls, call) if calls else []:
            for i in (0, 1, 2, 3, 4, 7, 8, 11):
                totals[i] += int(out[i])
            for i in (5, 6, 9, 10):
                lines[i] += reply_lines(out[i])
        return AddResult(
            added=totals[0],
            seen_hits=totals[1],
            host_capped=totals[2],
            pattern_capped=totals[3],
            credited=totals[4],
            newly_capped=lines[5],
            newly_pattern_capped=lines[6],
            over_budget=totals[7],
            token_parked=totals[8],
            newly_over_budget=lines[9],
            newly_contained=[host_and_shape(line) for line in lines[10]],
            released=totals[11],
        )

    # -- URLs out ------------------------------------------------------------------

    async def claim(self, shard: int, max_n: int, worker: str) -> ClaimBatch:
        out = await self._run(
            "claim",
            shard,
            max_n,
            self.lease_ms,
            self.default_delay_ms,
            self.default_concurrency,
            worker,
            self.aopic_tax,
        )
        now_ms, next_ready = int(out[0]), int(out[1])
        # id, host key, request (stored form: its URL after the host key), share
        items = [
            (Lease(shard, int(out[i])), whole_form(out[i + 2], reply_text(out[i + 1])))
            for i in range(2, len(out), 4)
        ]
        shares = (
            [float(out[i + 3]) for i in range(2, len(out), 4)]
            if self.priority_mode == "credit"
            else []
        )
        return ClaimBatch(shard, now_ms, None if next_ready < 0 else next_ready, items, shares)

    async def release(self, releases: Sequence[Release]) -> int:
        """Frees the host slots of leases whose fetch is over; requeues those asked."""
        by_shard: dict[int, list[Any]] = defaultdict(list)
        for r in releases:
            by_shard[r.lease.shard] += [
                r.lease.id,
                max(0, r.age_ms),
                r.fetch_ms,
                max(0, r.hold_ms),
                r.flags,
            ]
        a = self.adaptive
        head = [
            self.default_delay_ms,
            self.default_concurrency,
            a.factor,
            a.max_ms,
            a.backoff_max_ms,
        ]
        calls = [(shard, [*head, *pairs]) for shard, pairs in by_shard.items()]
        return sum(await self._pipelined("release", calls)) if calls else 0

    async def ack(
        self, leases: Sequence[Lease], mode: str = "done", call: str | None = None
    ) -> tuple[int, int]:
        """mode: done | moved | dead | return (see ack.lua). Returns (acked, missing).
        ``call``: as add's."""
        head = [self.default_delay_ms, self.default_concurrency, mode]
        calls = [(shard, [*head, *ids]) for shard, ids in group_by_shard(leases).items()]
        results = await self._pipelined("ack", calls, call) if calls else []
        for (shard, _), (_, _, done) in zip(calls, results, strict=True):
            self.done_seen[shard] = int(done)
        return sum(r[0] for r in results), sum(r[1] for r in results)

    async def renew(self, leases: Sequence[Lease]) -> list[Lease]:
        groups = list(group_by_shard(leases).items())
        calls = [(shard, [self.lease_ms, *ids]) for shard, ids in groups]
        results = await self._pipelined("renew", calls) if calls else []
        pairs = zip(groups, results, strict=True)
        return [Lease(shard, int(i)) for (shard, _), gone in pairs for i in gone]

    async def reclaim(self, shard: int) -> tuple[int, int]:
        """Takes back expired leases: (reclaimed, poisoned), see reclaim.lua."""
        out = await self._run(
            "reclaim",
            shard,
            self.default_delay_ms,
            self.default_concurrency,
            RECLAIM_BATCH,
            self.max_reclaims,
        )
        return int(out[0]), int(out[1])

    # -- hosts, seeds, scope, workers -------------------------------------------------

    async def set_host_config(self, pkey: str, delay_ms: int | None, conc: int | None) -> None:
        """A host's own delay and concurrency (None: the crawl's default)."""
        await self._host_fields(pkey, {"delay": delay_ms, "conc": conc})

    async def set_robots_delay(self, pkey: str, delay_ms: int | None) -> None:
        """A host's robots.txt Crawl-delay; its delay is the larger of this and its own."""
        await self._host_fields(pkey, {"rdelay": delay_ms})

    async def _host_fields(self, pkey: str, fields: dict[str, int | None]) -> None:
        args: list[Any] = [self.default_concurrency, pkey]
        for name, value in fields.items():
            args += [name, "" if value is None else value]
        await self._run("host_config", self.keys.shard_of(pkey), *args)

    async def host_state(self, pkey: str) -> dict[str, int]:
        """The stored politeness fields of a host (see ``h:<pkey>`` in keys.py)."""
        shard = self.keys.shard_of(pkey)
        raw = await self.redis.hgetall(self.keys.host(shard, pkey))
        return {reply_text(k): int(float(v)) for k, v in raw.items()}

    async def read_start_urls(self, max_n: int) -> list[bytes]:
        """The oldest ``max_n`` seeds pushed on ``<crawl>:start_urls``, oldest last."""
        items = await self.redis.lrange(self.keys.start_urls, -max_n, -1)
        return [i if isinstance(i, bytes) else i.encode() for i in items]

    async def trim_start_urls(self, items: Sequence[bytes]) -> int:
        return int(await self._trim_start_urls(keys=[self.keys.start_urls], args=list(items)))

    async def add_scope(self, roots: Iterable[str]) -> None:
        roots = list(roots)
        if roots:
            await self.redis.sadd(self.keys.scope, *roots)

    async def scope(self) -> set[str]:
        return {reply_text(r) for r in await self.redis.smembers(self.keys.scope)}

    async def heartbeat(self, worker: str) -> None:
        await self.redis.zadd(self.keys.workers, {worker: int(time.time() * 1000)})

    async def forget_worker(self, worker: str) -> None:
        await self.redis.zrem(self.keys.workers, worker)

    # -- gauges -----------------------------------------------------------------------

    async def counters(self) -> dict[str, int]:
        """Frontier counters summed over shards (see ``n`` in keys.py)."""
        pipe = self.redis.pipeline(transaction=False)
        for shard in range(self.keys.shards):
            pipe.hgetall(self.keys.counters(shard))
        totals: dict[str, int] = defaultdict(int)
        for h in await pipe.execute():
            for k, v in h.items():
                totals[reply_text(k)] += int(v)
        totals["start_urls"] = int(await self.redis.llen(self.keys.start_urls))
        return dict(totals)
