"""The robots.txt store and its fetch lock, on a real redis-server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.robots.policy import RobotsKind, RobotsRecord
from crawlproject.robots.store import PLAIN_RECORD_GRACE_MS, RobotsStore

ORIGIN = "http://a.test"
OUTAGE_MS = 30 * 86_400_000


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RobotsStore]:
    redis = Redis.from_url(redis_url)
    yield RobotsStore(redis, CrawlKeys("t", 4), OUTAGE_MS)
    await redis.aclose()


async def test_records_round_trip_and_outlive_their_ttl_only_with_a_copy(
    store: RobotsStore,
) -> None:
    now = int(time.time() * 1000)
    ok = RobotsRecord(RobotsKind.OK, 200, now, now + 86_400_000, body=b"User-agent: *\n")
    await store.put(1, ORIGIN, ok)
    assert await store.get(1, ORIGIN) == ok
    assert await store.get(2, ORIGIN) is None  # another shard's key
    key = store.keys.robots(1, ORIGIN)
    assert await store.redis.pexpiretime(key) == ok.expires_ms + OUTAGE_MS
    gone = RobotsRecord(RobotsKind.UNAVAILABLE, 404, now, now + 86_400_000)
    await store.put(1, ORIGIN, gone)  # replaces every field
    assert await store.get(1, ORIGIN) == gone
    assert await store.redis.pexpiretime(key) == gone.expires_ms + PLAIN_RECORD_GRACE_MS
    await store.redis.hset(key, "b", b"not zlib")
    assert await store.get(1, ORIGIN) is None  # damaged: fetched again


async def test_the_fetch_lock_has_one_owner_and_expires(store: RobotsStore) -> None:
    assert await store.try_lock(0, ORIGIN, "w1", 300)
    assert not await store.try_lock(0, ORIGIN, "w2", 300)
    await store.unlock(0, ORIGIN, "w2")  # not its lock: no effect
    assert not await store.try_lock(0, ORIGIN, "w2", 300)
    assert await store.renew_lock(0, ORIGIN, "w1", 300)
    assert not await store.renew_lock(0, ORIGIN, "w2", 300)
    await asyncio.sleep(0.35)  # w1 died: its lock expires
    assert not await store.renew_lock(0, ORIGIN, "w1", 300)
    assert await store.try_lock(0, ORIGIN, "w2", 300)
    await store.unlock(0, ORIGIN, "w2")
    assert await store.try_lock(0, ORIGIN, "w3", 300)


async def test_a_missing_or_stale_record_comes_with_the_lock_in_one_call(
    store: RobotsStore,
) -> None:
    now = int(time.time() * 1000)
    assert await store.get_or_lock(0, ORIGIN, now, "w1", 5_000) == (None, True)
    assert await store.get_or_lock(0, ORIGIN, now, "w2", 5_000) == (None, False)  # w1 fetches
    ok = RobotsRecord(RobotsKind.OK, 200, now, now + 60_000, body=b"User-agent: *\n")
    await store.put_and_unlock(0, ORIGIN, ok, "w2")  # not w2's lock: stored, lock kept
    assert not await store.try_lock(0, ORIGIN, "w3", 5_000)
    await store.put_and_unlock(0, ORIGIN, ok, "w1")
    key = store.keys.robots(0, ORIGIN)
    assert await store.get(0, ORIGIN) == ok  # as put stores it, same expiry
    assert await store.redis.pexpiretime(key) == ok.expires_ms + OUTAGE_MS
    # Fresh: the record, no lock taken.
    assert await store.get_or_lock(0, ORIGIN, now, "w3", 5_000) == (ok, False)
    assert await store.try_lock(0, ORIGIN, "w3", 5_000)
    await store.unlock(0, ORIGIN, "w3")
    # Stale at a later time: the old record (its copy is the fallback) and the lock.
    later = ok.expires_ms + 1
    assert await store.get_or_lock(0, ORIGIN, later, "w4", 5_000) == (ok, True)
    assert await store.get_or_lock(0, ORIGIN, later, "w5", 5_000) == (ok, False)
