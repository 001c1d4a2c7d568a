"""The other scripts on a frontier shard's slot (robots.txt's get_or_lock and
put_unlock, recrawl_promote), called through their stores while the slot is
held half-migrated on a real Redis Cluster, as the frontier's scripts are in
tests/test_slot_migration_scripts.py: no error, nothing written while a call
is refused, the right answer once the slot has moved (the fetch lock taken
once, a record stored once, a due URL queued once)."""

from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

from crawlproject.recrawl.store import RecrawlStore
from crawlproject.robots.policy import RobotsKind, RobotsRecord
from crawlproject.robots.store import RobotsStore
from testkit.redis_cluster import RedisCluster
from testkit.slot_migration import LAYOUTS, run_held
from tests.test_recrawl_store import NOW_S, promote, state_write
from tests.test_slot_migration_scripts import client, cluster, frontier, prepared, shard_slot

__all__ = ["client", "cluster"]  # the fixtures, shared

pytestmark = pytest.mark.parametrize("layout", LAYOUTS)

ORIGIN = "http://h0.test"


def record(now_ms: int, ttl_ms: int) -> RobotsRecord:
    return RobotsRecord(RobotsKind.OK, 200, now_ms, now_ms + ttl_ms, body=b"User-agent: *\n")


async def test_robots_get_or_lock(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = await prepared(frontier(client))
    store = RobotsStore(client, f.keys, outage_ms=60_000)
    now = int(time.time() * 1000)
    assert await store.get_or_lock(0, ORIGIN, now, "w1", 60_000) == (None, True)
    stale = record(now - 10_000, 5_000)
    await store.put_and_unlock(0, ORIGIN, stale, "w1")
    held = await run_held(
        cluster, [shard_slot(cluster, f)], layout,
        lambda: store.get_or_lock(0, ORIGIN, now, "w2", 60_000),
    )  # fmt: skip
    assert held.result == (stale, True)  # stale: w2 fetches for the fleet
    assert await store.get_or_lock(0, ORIGIN, now, "w3", 60_000) == (stale, False)  # once


async def test_robots_put_and_unlock(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = await prepared(frontier(client))
    store = RobotsStore(client, f.keys, outage_ms=60_000)
    now = int(time.time() * 1000)
    # A stale record being refreshed: put_unlock replaces a record that exists.
    assert await store.get_or_lock(0, ORIGIN, now, "w0", 60_000) == (None, True)
    stale = record(now - 10_000, 5_000)
    await store.put_and_unlock(0, ORIGIN, stale, "w0")
    assert await store.get_or_lock(0, ORIGIN, now, "w1", 60_000) == (stale, True)
    fresh = record(now, 86_400_000)
    held = await run_held(
        cluster, [shard_slot(cluster, f)], layout,
        lambda: store.put_and_unlock(0, ORIGIN, fresh, "w1"),
    )  # fmt: skip
    assert held.result is None
    assert await client.exists(f.keys.robots_lock(0, ORIGIN)) == 0  # unlocked
    assert await store.get_or_lock(0, ORIGIN, now, "w2", 60_000) == (fresh, False)


async def test_recrawl_promote(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = await prepared(frontier(client))
    store = RecrawlStore(client, f.keys)
    await store.write([state_write(f"http://r{i}.test/p", NOW_S - 60) for i in range(3)])
    queued = (await f.counters())["queued"]
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: promote(store))
    assert held.result == (3, 0, 0, 0)
    assert await promote(store) == (0, 0, 0, 0)  # out of the schedule: queued once
    assert (await f.counters())["queued"] == queued + 3
    assert await client.zcard(f.keys.recrawl_due(0)) == 0
