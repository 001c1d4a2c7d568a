"""The address scripts (``lua/address_*.lua``), seen from one worker: places at
addresses on their home shards, and the waits and wakes of hosts on theirs.

An address's counters live in frontier shard ``crc32(address) % shards`` (its
*home*, ``CrawlKeys.address_shard``), under that shard's hash tag like a host's
keys, so each script touches one Redis Cluster hash slot. Calls of one kind are
grouped by shard and sent in one round trip (``evalsha_many``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import AdaptiveDelay, Lease
from crawlproject.frontier.store.script_replies import reply_text
from crawlproject.lua import SHARD_PRELUDES, Prelude, load_script
from crawlproject.redis_calls import evalsha_many, register_script

ADDRESS_PRELUDE = ("crawlproject.frontier.store", "_address")
# On an address's home shard / on a host's shard (the latter use the host queues).
ADDRESS_SCRIPTS = ("address_take", "address_release", "address_renew")
HOST_SCRIPTS = ("address_wait", "address_wake")
NO_DELAY = -1  # delay_ms of the address scripts when the address keeps no time (host mode)


def address_script_preludes(name: str) -> tuple[Prelude, ...]:
    """The preludes an address script goes after (as client.script_preludes
    does for the frontier's)."""
    return (ADDRESS_PRELUDE,) if name in ADDRESS_SCRIPTS else SHARD_PRELUDES


@dataclass(frozen=True, slots=True)
class PlaceAsk:
    """A claimed URL asking for a place at its host's address."""

    lease: Lease
    pkey: str  # the politeness key its host queue lives under
    address: str
    cap: int


@dataclass(frozen=True, slots=True)
class PlaceRelease:
    """A place whose fetch is over (see address_release.lua for the fields)."""

    token: str  # the lease's token
    address: str
    cap: int
    age_ms: int = 0
    fetch_ms: int = -1
    hold_ms: int = 0
    flags: int = 4  # the Release flags; 4 = no contact


@dataclass(frozen=True, slots=True)
class Wake:
    """A waiting host whose place is its turn, ``after_ms`` from now."""

    pkey: str
    after_ms: int


@dataclass(frozen=True, slots=True)
class AddressTiming:
    """What the scripts need besides the places: lease and wait lengths, and
    the address's own politeness in address mode (``delay_ms`` NO_DELAY: none)."""

    lease_ms: int
    reserve_ms: int  # a woken host's place is kept this long past its time
    block_ms: int  # longest a host waits for its turn before asking again
    delay_ms: int
    adaptive: AdaptiveDelay
    host_delay_ms: int  # the crawl's default host delay and concurrency (host scripts)
    host_concurrency: int


class AddressClient:
    def __init__(self, redis: Redis, keys: CrawlKeys, timing: AddressTiming) -> None:
        self.redis = redis
        self.keys = keys
        self.timing = timing
        self._scripts: dict[str, AsyncScript] = {
            name: register_script(
                redis,
                load_script("crawlproject.frontier.store", name, *address_script_preludes(name)),
            )
            for name in (*ADDRESS_SCRIPTS, *HOST_SCRIPTS)
        }

    async def _run(
        self, name: str, calls: dict[int, list[Any]], head: Sequence[Any]
    ) -> dict[int, Any]:
        """One run of script ``name`` per shard (args: its prefix, ``head``, the
        shard's own), all in one round trip; a server that lost its scripts
        (restart, SCRIPT FLUSH) gets them again."""
        script = self._scripts[name]
        shards = list(calls)
        runs = [
            (script.sha, self.keys.script_keys(s), [self.keys.shard_prefixes[s], *head, *calls[s]])
            for s in shards
        ]
        replies = await evalsha_many(self.redis, runs)  # loads a lost script again
        return dict(zip(shards, replies, strict=True))

    # -- on the addresses' home shards ------------------------------------------------

    async def take(self, asks: Sequence[PlaceAsk]) -> tuple[list[int], list[Wake]]:
        """Asks a place for each URL: per ask, 0 (granted) or how long its host
        stays away (ms); and the waiting hosts whose turn came."""
        order: dict[int, list[int]] = defaultdict(list)
        calls: dict[int, list[Any]] = defaultdict(list)
        for i, ask in enumerate(asks):
            shard = self.keys.address_shard(ask.address)
            order[shard].append(i)
            calls[shard] += [ask.lease.token, ask.pkey, ask.address, ask.cap]
        t = self.timing
        head = [t.lease_ms, t.reserve_ms, t.block_ms, t.delay_ms]
        waits = [0] * len(asks)
        wakes: list[Wake] = []
        for shard, (verdicts, woken) in (await self._run("address_take", calls, head)).items():
            for i, wait in zip(order[shard], verdicts, strict=True):
                waits[i] = int(wait)
            wakes += _wakes(woken)
        return waits, wakes

    async def release(self, places: Sequence[PlaceRelease]) -> list[Wake]:
        """Frees places; returns the waiting hosts whose turn came."""
        calls: dict[int, list[Any]] = defaultdict(list)
        for p in places:
            calls[self.keys.address_shard(p.address)] += [
                p.token, p.address, p.cap, max(0, p.age_ms), p.fetch_ms, max(0, p.hold_ms), p.flags,
            ]  # fmt: skip
        if not calls:
            return []
        t, a = self.timing, self.timing.adaptive
        head = [t.reserve_ms, t.delay_ms, a.factor, a.max_ms, a.backoff_max_ms]
        return [w for woken in (await self._run("address_release", calls, head)).values()
                for w in _wakes(woken)]  # fmt: skip

    async def renew(self, places: Sequence[tuple[str, str]]) -> set[str]:
        """Extends (address, token) places; returns the tokens whose place is gone."""
        calls: dict[int, list[Any]] = defaultdict(list)
        for address, token in places:
            calls[self.keys.address_shard(address)] += [address, token]
        if not calls:
            return set()
        replies = await self._run("address_renew", calls, [self.timing.lease_ms])
        return {reply_text(token) for lost in replies.values() for token in lost}

    # -- on the hosts' shards -------------------------------------------------------------

    async def wait(self, denials: Sequence[tuple[Lease, int]]) -> int:
        """Sends URLs that got no place back to their queues unfetched; each
        host stays away its wait (ms). Returns how many leases went back."""
        calls: dict[int, list[Any]] = defaultdict(list)
        for lease, wait_ms in denials:
            calls[lease.shard] += [lease.id, max(0, wait_ms)]
        if not calls:
            return 0
        t = self.timing
        head = [t.host_delay_ms, t.host_concurrency, t.reserve_ms]
        return sum(int(n) for n in (await self._run("address_wait", calls, head)).values())

    async def wake(self, wakes: Sequence[Wake]) -> dict[int, int]:
        """Wakes waiting hosts; returns the hosts woken per shard."""
        calls: dict[int, list[Any]] = defaultdict(list)
        for w in wakes:
            calls[self.keys.shard_of(w.pkey)] += [w.pkey, max(0, w.after_ms)]
        if not calls:
            return {}
        replies = await self._run("address_wake", calls, [self.timing.host_concurrency])
        return {shard: int(n) for shard, n in replies.items()}


def _wakes(reply: Sequence[Any]) -> list[Wake]:
    return [Wake(reply_text(reply[i]), int(reply[i + 1])) for i in range(0, len(reply) - 1, 2)]
