"""Each multi-key frontier script, and the duplicate index's, called through the
project's own clients while its slot is held half-migrated on a real Redis
Cluster (issue 35, "What must be shown"): its keys all on the source, all on
the target, or split between them (testkit/slot_migration.py, as
``redis-cli --cluster reshard`` leaves a slot between two MIGRATE batches).

Each call must raise nothing, must not be half-applied (while it is held off,
every key of the slot is, DUMP for DUMP, what it was before), and once the move
completes it must give the right answer: a URL claimed once, acked once,
counted once; nothing lost, nothing twice.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from crawlproject.frontier.claims.address_scripts import AddressClient, PlaceAsk, PlaceRelease, Wake
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import HostBudget, Lease, RedisFrontier, Release
from crawlproject.frontier.store.seen_set import SeenFilter
from testkit.redis_cluster import RedisCluster
from testkit.slot_migration import LAYOUTS, key_slot, run_held
from tests.test_address_scripts import ADDRESS, BLOCK_MS, client_of
from tests.test_frontier_scripts import CODEC, entry

pytestmark = pytest.mark.parametrize("layout", LAYOUTS)
# The scripts whose paths differ in credit mode (AOPIC: b:<pkey>, aopic, qseq).
MODES = pytest.mark.parametrize("mode", ["score", "credit"])


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    nodes = RedisCluster().start()
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
async def client(cluster: RedisCluster) -> AsyncIterator[Redis]:
    # The worker's own client: rides through TRYAGAIN, ASK, MOVED, CLUSTERDOWN.
    r = redis_client(cluster.url, outage_seconds=30)
    yield r
    await r.aclose()


def frontier(client: Redis, delay_ms: int = 0, lease_ms: int = 30_000, **kw: Any) -> RedisFrontier:
    """A fresh crawl of one shard, so all its keys share one slot."""
    keys = CrawlKeys(f"mig-{uuid.uuid4().hex[:8]}", 1)
    return RedisFrontier(client, keys, delay_ms, 1, lease_ms, **kw)


# A host waiting out a long delay, as most hosts of a running crawl are: its
# shard's ``ready`` is not empty (the key the scripts are routed by today).
WAITING = "wait.test"


async def prepared(f: RedisFrontier) -> RedisFrontier:
    await f.prepare()
    await f.set_host_config(WAITING, 600_000, None)
    await f.add([entry(f"http://{WAITING}/0"), entry(f"http://{WAITING}/1")])
    ((lease, _),) = await claimed(f)
    assert await f.ack([lease]) == (1, 0)
    assert await f.redis.zcard(f.keys.ready(0)) == 1
    return f


def shard_slot(cluster: RedisCluster, f: RedisFrontier) -> int:
    return key_slot(cluster.nodes[0].port, f.keys.ready(0))


async def scores(client: Redis, key: str) -> dict[bytes, float]:
    pairs: list[Any] = await client.zrange(key, 0, -1, withscores=True)
    return {bytes(m): float(s) for m, s in pairs}


def urls(n_hosts: int, per_host: int, first: int = 0) -> list[str]:
    return [f"http://h{h}.test/{i}" for h in range(n_hosts) for i in range(first, first + per_host)]


async def claimed(f: RedisFrontier, n: int = 100) -> list[tuple[Lease, str]]:
    return [
        (lease, CODEC.decode(data, None).url) for lease, data in (await f.claim(0, n, "w")).items
    ]


async def drain(f: RedisFrontier) -> list[str]:
    """Every URL still queued, claimed and acked, in claim order."""
    out: list[str] = []
    for _ in range(200):
        batch = await claimed(f)
        if not batch:
            counts = await f.counters()
            if counts.get("queued", 0) == 1:  # WAITING's
                return out
            await asyncio.sleep(0.05)
            continue
        out += [url for _, url in batch]
        assert await f.ack([lease for lease, _ in batch]) == (len(batch), 0)
    raise AssertionError(f"the queue did not drain: {await f.counters()}")


def once(got: list[str], expected: list[str]) -> None:
    twice = {u: n for u, n in Counter(got).items() if n > 1}
    assert not twice, twice
    assert sorted(got) == sorted(expected)


@MODES
async def test_add(cluster: RedisCluster, client: Redis, layout: str, mode: str) -> None:
    f = frontier(client, priority_mode=mode)
    await prepared(f)
    await f.add([entry(u) for u in urls(3, 2)])
    new = ["http://h0.test/9", "http://h1.test/9", "http://h7.test/0"]
    held = await run_held(
        cluster, [shard_slot(cluster, f)], layout,
        lambda: f.add([entry(u) for u in [*new, "http://h2.test/0"]]),
    )  # fmt: skip
    assert (held.result.added, held.result.seen_hits) == (3, 1)
    once(await drain(f), urls(3, 2) + new)
    assert (await f.counters())["done"] == 1 + 9


@MODES
async def test_claim(cluster: RedisCluster, client: Redis, layout: str, mode: str) -> None:
    f = frontier(client, priority_mode=mode)
    await prepared(f)
    await f.add([entry(u) for u in urls(4, 2)])
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: claimed(f))
    got = held.result
    # One URL of each due host (one slot each): in score mode its first; in
    # credit mode either (both carry the same credit).
    hosts = sorted(u.split("/")[2] for _, u in got)
    assert hosts == [f"h{h}.test" for h in range(4)] and {u for _, u in got} <= set(urls(4, 2))
    if mode == "score":
        assert sorted(u for _, u in got) == urls(4, 1)
    assert (await f.counters())["leased"] == len(got)
    assert await f.ack([lease for lease, _ in got]) == (len(got), 0)
    once([u for _, u in got] + await drain(f), urls(4, 2))


@MODES
async def test_ack(cluster: RedisCluster, client: Redis, layout: str, mode: str) -> None:
    f = frontier(client, priority_mode=mode)
    await prepared(f)
    await f.add([entry(u) for u in urls(4, 1)])
    leases = [lease for lease, _ in await claimed(f)]
    assert len(leases) == 4
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: f.ack(leases))
    assert held.result == (4, 0)
    assert await f.ack(leases) == (0, 4)  # acked once
    counts = await f.counters()
    assert (counts["done"], counts["leased"], counts["queued"]) == (1 + 4, 0, 1)


@MODES
async def test_release(cluster: RedisCluster, client: Redis, layout: str, mode: str) -> None:
    f = frontier(client, priority_mode=mode)
    await prepared(f)
    await f.add([entry(u) for u in urls(3, 2)])
    first = await claimed(f)
    releases = [Release(lease, 0) for lease, _ in first]
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: f.release(releases))
    assert held.result == 3
    assert await f.release(releases) == 0  # released once
    second = await claimed(f)  # each host's slot is free again
    once([u for _, u in first + second], urls(3, 2))
    assert await f.ack([lease for lease, _ in first + second]) == (6, 0)


async def test_renew(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = frontier(client, lease_ms=60_000)
    await prepared(f)
    await f.add([entry(u) for u in urls(2, 1)])
    leases = [lease for lease, _ in await claimed(f)]
    expiry = await scores(client, f.keys.leases(0))
    await asyncio.sleep(0.01)
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: f.renew(leases))
    assert held.result == []  # none lost
    renewed = await scores(client, f.keys.leases(0))
    assert set(renewed) == set(expiry) and all(renewed[m] > expiry[m] for m in expiry)
    assert await f.ack(leases) == (2, 0)


@MODES
async def test_reclaim(cluster: RedisCluster, client: Redis, layout: str, mode: str) -> None:
    f = frontier(client, lease_ms=100, priority_mode=mode)
    await prepared(f)
    await f.add([entry(u) for u in urls(3, 1)])
    dead = await claimed(f)
    await asyncio.sleep(0.2)
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: f.reclaim(0))
    assert held.result == (3, 0)
    assert await f.reclaim(0) == (0, 0)  # reclaimed once
    assert await f.ack([lease for lease, _ in dead]) == (0, 3)
    once(await drain(f), urls(3, 1))
    assert (await f.counters())["reclaimed"] == 3


async def test_host_config(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = frontier(client)
    await prepared(f)
    await f.add([entry(u) for u in urls(2, 2)])
    held = await run_held(
        cluster, [shard_slot(cluster, f)], layout, lambda: f.set_host_config("h0.test", 5000, 3)
    )
    assert held.result is None
    state = await f.host_state("h0.test")
    assert (state["delay"], state["conc"]) == (5000, 3)
    once(await drain(f), urls(2, 2))  # 3 slots, no delay before the first fetch


async def test_park_host(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = frontier(client)
    await prepared(f)
    await f.add([entry(u) for u in urls(2, 3)])
    held = await run_held(
        cluster, [shard_slot(cluster, f)], layout, lambda: f.park_host("h0.test", "duplicates")
    )
    assert held.result == 3
    assert await f.parked_by_host() == {"h0.test": 3}
    assert await f.trap_reasons() == {"h0.test": {"duplicates": 3}}
    once(await drain(f), urls(2, 3)[3:])


@MODES
async def test_unpark(cluster: RedisCluster, client: Redis, layout: str, mode: str) -> None:
    f = frontier(client, priority_mode=mode)
    await prepared(f)
    await f.add([entry(u) for u in urls(2, 3)])
    assert await f.park_host("h0.test", "duplicates") == 3
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, f.unpark_all)
    assert held.result == 3
    assert await f.parked_by_host() == {}
    once(await drain(f), urls(2, 3))


@MODES
async def test_budget_release(cluster: RedisCluster, client: Redis, layout: str, mode: str) -> None:
    f = frontier(client, budget=HostBudget(base=10, seed_votes=0), priority_mode=mode)
    await prepared(f)
    await f.add([entry(u) for u in urls(1, 15)])
    assert await f.over_budget_by_host() == {"h0.test": 5}
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, f.release_over_budget)
    assert held.result == 5
    assert await f.over_budget_by_host() == {}
    once(await drain(f), urls(1, 15))


async def leased_hosts(f: RedisFrontier, n: int) -> tuple[AddressClient, dict[str, Lease]]:
    await prepared(f)
    await f.add([entry(u) for u in urls(n, 2)])
    leases = {u.split("/")[2]: lease for lease, u in await claimed(f)}
    assert len(leases) == n
    return client_of(f), leases


async def test_address_take(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = frontier(client)
    places, leases = await leased_hosts(f, 4)
    asks = [PlaceAsk(lease, host, ADDRESS, 2) for host, lease in leases.items()]
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: places.take(asks))
    assert held.result == ([0, 0, BLOCK_MS, BLOCK_MS], [])
    assert await client.zcard(f.keys.address_places(0, ADDRESS)) == 2  # taken once


async def test_address_release(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = frontier(client)
    places, leases = await leased_hosts(f, 3)
    hosts = list(leases)
    await places.take([PlaceAsk(leases[h], h, ADDRESS, 2) for h in hosts])
    free = [PlaceRelease(leases[hosts[0]].token, ADDRESS, 2)]
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: places.release(free))
    assert [w.pkey for w in held.result] == [hosts[2]]  # the waiting host, woken once
    assert await client.zrange(f.keys.address_places(0, ADDRESS), 0, -1) == [
        leases[hosts[1]].token.encode()
    ]
    assert await places.release(free) == []


async def test_address_renew(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = frontier(client)
    places, leases = await leased_hosts(f, 2)
    await places.take([PlaceAsk(lease, h, ADDRESS, 2) for h, lease in leases.items()])
    key = f.keys.address_places(0, ADDRESS)
    expiry = await scores(client, key)
    await asyncio.sleep(0.01)
    mine = [(ADDRESS, lease.token) for lease in leases.values()]
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: places.renew(mine))
    assert held.result == set()
    renewed = await scores(client, key)
    assert set(renewed) == set(expiry) and all(renewed[m] > expiry[m] for m in expiry)


@MODES
async def test_address_wait(cluster: RedisCluster, client: Redis, layout: str, mode: str) -> None:
    f = frontier(client, priority_mode=mode)
    places, leases = await leased_hosts(f, 2)
    denied = [(lease, 0) for lease in leases.values()]
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: places.wait(denied))
    assert held.result == 2
    assert await places.wait(denied) == 0  # sent back once
    counts = await f.counters()
    assert (counts["leased"], counts["queued"]) == (0, 1 + 4)
    once(await drain(f), urls(2, 2))


async def test_address_wake(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = frontier(client)
    places, leases = await leased_hosts(f, 2)
    assert await places.wait([(lease, BLOCK_MS) for lease in leases.values()]) == 2
    assert await claimed(f) == []  # both hosts wait for their address
    wakes = [Wake(host, 0) for host in leases]
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, lambda: places.wake(wakes))
    assert held.result == {0: 2}
    once(await drain(f), urls(2, 2))


async def test_seen_init(cluster: RedisCluster, client: Redis, layout: str) -> None:
    # A worker joining a Bloom-filter crawl makes the segments not yet there.
    seen = SeenFilter("bloom", capacity=20_000)
    f = frontier(client, seen=seen)
    await prepared(f)
    await f.add([entry(u) for u in urls(2, 2)])
    joining = RedisFrontier(client, f.keys, 0, 1, 30_000, seen=seen)
    held = await run_held(cluster, [shard_slot(cluster, f)], layout, joining.prepare)
    assert held.result is None
    again = await f.add([entry(u) for u in urls(2, 3)])
    assert (again.added, again.seen_hits) == (2, 4)  # the seen bits survived
    once(await drain(f), urls(2, 3))


async def test_trim_start_urls(cluster: RedisCluster, client: Redis, layout: str) -> None:
    f = frontier(client)
    seeds = [f"http://s{i}.test/".encode() for i in range(5)]
    await client.lpush(f.keys.start_urls, *seeds)
    read = await f.read_start_urls(3)
    slot = key_slot(cluster.nodes[0].port, f.keys.start_urls)
    held = await run_held(cluster, [slot], layout, lambda: f.trim_start_urls(read))
    assert held.result == 3
    assert await f.trim_start_urls(read) == 0  # the list's tail is no longer those
    assert await client.lrange(f.keys.start_urls, 0, -1) == seeds[3:][::-1]  # the newest two
