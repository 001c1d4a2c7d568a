"""The recrawl state in Redis: per-URL fetch states and the due schedule.

Keys (per frontier shard, documented with the rest in crawlproject/frontier/store/keys.py):
``fs:<pkey>`` HASH (URL fingerprint, 8 bytes -> state text, see schedule.py) and
``rdue`` ZSET (fingerprint .. pkey -> due time, unix s). A URL is in ``rdue``
while it waits for its next fetch, and out of it while queued or in flight:
``recrawl_promote.lua`` takes it out when it queues it, the worker that
fetched it puts it back (:meth:`RecrawlStore.write`). Both keys live in the
host's shard, so promotion (schedule -> host queue) is one atomic script.

Asyncio redis client: callers on the reactor await it, never block on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from crawlproject.lua import (
    CALL_IDS,
    SHARD_PRELUDES,
    load_script,
    once_per_call,
)
from crawlproject.redis_calls import call_reply_ms

if TYPE_CHECKING:
    from redis.asyncio import Redis


class RecrawlKeys(Protocol):
    """The key names the recrawl store uses: the crawl's CrawlKeys
    (crawlproject/frontier/store/keys.py, the one place keys are built); a protocol
    so that this package does not import the frontier, which imports it."""

    shards: int
    shard_prefixes: list[str]

    def shard_of(self, pkey: str) -> int: ...
    def ready(self, shard: int) -> str: ...
    def script_keys(self, shard: int) -> list[str]: ...
    def call_reply(self, shard: int, call: str) -> str: ...
    def recrawl_due(self, shard: int) -> str: ...
    def fetch_states(self, shard: int, pkey: str) -> str: ...


@dataclass(frozen=True, slots=True)
class StateWrite:
    """One URL's new fetch state (``state`` None: no longer tracked)."""

    pkey: str
    fingerprint: bytes  # 8 bytes, the frontier's URL fingerprint
    state: str | None
    due_s: int = 0


@dataclass(frozen=True, slots=True)
class PromoteResult:
    promoted: int
    lost: int  # schedule entries without a state (dropped)
    due_left: int  # still due (<= now) after this call
    oldest_due_s: int  # due time of the earliest entry left (0: none)


@dataclass(frozen=True, slots=True)
class Backlog:
    tracked: int  # URLs in the due schedule (waiting for a fetch)
    overdue: int  # of which due now
    oldest_overdue_seconds: float  # how long the most overdue one has waited (0: none)


class RecrawlStore:
    def __init__(self, redis: Redis, keys: RecrawlKeys) -> None:
        self.redis = redis
        self.keys = keys
        # Once per call id (lua.py once_per_call): sent again by redis-py's
        # cluster client, it answers its first run's counts.
        self._promote = redis.register_script(
            once_per_call(
                load_script("crawlproject.recrawl", "recrawl_promote", *SHARD_PRELUDES),
                call_reply_ms(redis),
            )
        )

    def _schedule(self, shard: int) -> str:
        return self.keys.recrawl_due(shard)

    def _states(self, shard: int, pkey: str) -> str:
        return self.keys.fetch_states(shard, pkey)

    async def write(self, writes: Sequence[StateWrite]) -> None:
        """Stores fetch states and due times (or forgets URLs), one round trip."""
        if not writes:
            return
        pipe = self.redis.pipeline(transaction=False)
        for w in writes:
            shard = self.keys.shard_of(w.pkey)
            member = w.fingerprint + w.pkey.encode("utf-8")
            if w.state is None:
                pipe.hdel(self._states(shard, w.pkey), w.fingerprint)
                pipe.zrem(self._schedule(shard), member)
            else:
                pipe.hset(self._states(shard, w.pkey), w.fingerprint, w.state.encode("utf-8"))
                pipe.zadd(self._schedule(shard), {member: w.due_s})
        await pipe.execute()

    async def promote(
        self,
        shard: int,
        now_s: int,
        batch: int,
        max_queued: int,
        default_delay_ms: int,
        default_concurrency: int,
        callback: str,
        errback: str,
        everything: bool = False,
    ) -> PromoteResult:
        """Queues up to ``batch`` due URLs of ``shard`` (``everything``: due or not)."""
        reply: list[Any] = await self._promote(
            # + slotguard: held off while its slot moves; + the call's reply key
            keys=[
                *self.keys.script_keys(shard),
                self.keys.call_reply(shard, CALL_IDS.new()),
            ],
            args=[
                self.keys.shard_prefixes[shard], now_s, batch, max_queued, default_delay_ms,
                default_concurrency, "1" if everything else "0", callback, errback,
            ],
        )  # fmt: skip
        return PromoteResult(*(int(x) for x in reply))

    async def backlog(self, now_s: float) -> Backlog:
        """What waits in the due schedule, over all shards."""
        pipe = self.redis.pipeline(transaction=False)
        for shard in range(self.keys.shards):
            key = self._schedule(shard)
            pipe.zcard(key)
            pipe.zcount(key, "-inf", now_s)
            pipe.zrange(key, 0, 0, withscores=True)
        replies = await pipe.execute()
        tracked = overdue = 0
        oldest: float | None = None
        for i in range(0, len(replies), 3):
            tracked += int(replies[i])
            overdue += int(replies[i + 1])
            first = replies[i + 2]
            if first and first[0][1] <= now_s:
                oldest = first[0][1] if oldest is None else min(oldest, first[0][1])
        return Backlog(tracked, overdue, now_s - oldest if oldest is not None else 0.0)

    async def state(self, pkey: str, fingerprint: bytes) -> tuple[str | None, float | None]:
        """A URL's state text and due time (tests, the CLI)."""
        shard = self.keys.shard_of(pkey)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hget(self._states(shard, pkey), fingerprint)
        pipe.zscore(self._schedule(shard), fingerprint + pkey.encode("utf-8"))
        text, due = await pipe.execute()
        return (text.decode("utf-8") if text is not None else None), due
