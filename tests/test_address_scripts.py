"""Politeness per server at script level, on a real redis-server: places at an
address (crawlproject/frontier/store/lua/address_*.lua), hosts waiting for their
turn first come first served, places that come back with their lease, and the
address's own delay in address mode."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scrapy import Request

from crawlproject.frontier.basics.urls import host_key
from crawlproject.frontier.claims.address_gate import RESOLVE_HOLD_SECONDS, AddressGate, Place
from crawlproject.frontier.claims.address_scripts import (
    NO_DELAY,
    AddressClient,
    AddressTiming,
    PlaceAsk,
    PlaceRelease,
    Wake,
)
from crawlproject.frontier.crawl.address_settings import AddressConfig, read_address_overrides
from crawlproject.frontier.store.operation_values import AdaptiveDelay
from crawlproject.frontier.store.redis_frontier import Lease, RedisFrontier, Release
from crawlproject.frontier.store.script_replies import reply_text
from crawlproject.status.view import collect_status, render
from testkit.entries import CANON, CODEC, entry
from tests.conftest import MakeFrontier

ADDRESS = "10.0.0.1"
BLOCK_MS = 30_000


def client_of(f: RedisFrontier, delay_ms: int = NO_DELAY, lease_ms: int = 10_000) -> AddressClient:
    timing = AddressTiming(
        lease_ms=lease_ms,
        reserve_ms=5_000,
        block_ms=BLOCK_MS,
        delay_ms=delay_ms,
        adaptive=AdaptiveDelay(),
        host_delay_ms=f.default_delay_ms,
        host_concurrency=f.default_concurrency,
    )
    return AddressClient(f.redis, f.keys, timing)


async def claim_all(f: RedisFrontier) -> dict[str, Lease]:
    """Host -> the lease of the URL claimed from it, over every shard."""
    out: dict[str, Lease] = {}
    for shard in range(f.keys.shards):
        for lease, data in (await f.claim(shard, 100, "w")).items:
            out[host_key(CANON.canonicalize(CODEC.decode(data, None).url))] = lease
    return out


async def test_an_address_gives_its_places_in_turn(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(delay_ms=0)
    hosts = [f"h{i}.test" for i in range(6)]
    await f.add([entry(f"http://{h}/{k}") for h in hosts for k in range(2)])
    client = client_of(f)
    leases = await claim_all(f)
    assert set(leases) == set(hosts)
    asks = [PlaceAsk(leases[h], h, ADDRESS, 2) for h in hosts]
    waits, wakes = await client.take(asks)
    # Two places: the first two asks; the others wait to be woken, in order.
    assert waits == [0, 0] + [BLOCK_MS] * 4 and wakes == []
    assert await client.wait([(leases[h], BLOCK_MS) for h in hosts[2:]]) == 4
    shard = f.keys.address_shard(ADDRESS)
    waiting = await f.redis.zrange(f.keys.address_waiting(shard, ADDRESS), 0, -1)
    assert [reply_text(w) for w in waiting] == hosts[2:]
    # A waiting host is out of the claims (its URL is back, it waits), like a
    # host whose slot is taken.
    assert await claim_all(f) == {}
    state = await f.host_state(hosts[2])
    assert state["aw"] == state["next"] and state["awn"] <= state["next"]

    # A place frees: the host that waited longest is woken, its place reserved.
    await f.release([Release(leases[hosts[0]], 0, fetch_ms=5)])
    wakes = await client.release([PlaceRelease(leases[hosts[0]].token, ADDRESS, 2)])
    assert wakes == [Wake(hosts[2], 0)]
    again = await claim_all(f)
    assert set(again) == {hosts[0]}  # its second URL
    # A newcomer cannot take the reserved place...
    waits, _ = await client.take([PlaceAsk(again[hosts[0]], hosts[0], ADDRESS, 2)])
    assert waits == [BLOCK_MS]
    await client.wait([(again[hosts[0]], BLOCK_MS)])
    # ... the woken host can, once claimed again.
    assert sum((await client.wake(wakes)).values()) == 1
    woken = await claim_all(f)
    assert hosts[2] in woken
    waits, _ = await client.take([PlaceAsk(woken[hosts[2]], hosts[2], ADDRESS, 2)])
    assert waits == [0]
    # The newcomer queued behind the others: turns are h3, h4, h5, h0.
    order = []
    for _ in range(4):
        held = await f.redis.zrange(f.keys.address_places(shard, ADDRESS), 0, 0)
        (wake,) = await client.release([PlaceRelease(reply_text(held[0]), ADDRESS, 2)])
        order.append(wake.pkey)
        await client.wake([wake])
        claimed = await claim_all(f)
        waits, _ = await client.take([PlaceAsk(claimed[wake.pkey], wake.pkey, ADDRESS, 2)])
        assert waits == [0]
    assert order == [hosts[3], hosts[4], hosts[5], hosts[0]]
    counters = await f.counters()
    assert counters["address_denied"] == 5 and counters["address_woken"] == 5


async def test_a_dead_workers_places_come_back_with_its_lease(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(delay_ms=0)
    await f.add([entry(f"http://h{i}.test/") for i in range(3)])
    leases = await claim_all(f)
    client = client_of(f, lease_ms=200)
    asks = [PlaceAsk(leases[h], h, ADDRESS, 2) for h in sorted(leases)]
    assert (await client.take(asks[:2]))[0] == [0, 0]
    # Renewed while its worker lives...
    await asyncio.sleep(0.12)
    assert await client.renew([(ADDRESS, a.lease.token) for a in asks[:2]]) == set()
    await asyncio.sleep(0.12)
    assert (await client.take(asks[2:]))[0] == [BLOCK_MS]
    # ... and free once its leases expire unrenewed (the worker died).
    await asyncio.sleep(0.25)
    assert (await client.take(asks[2:]))[0] == [0]
    assert await client.renew([(ADDRESS, asks[0].lease.token)]) == {asks[0].lease.token}


async def test_in_address_mode_the_address_keeps_its_delay(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(delay_ms=0)
    await f.add([entry(f"http://h{i}.test/") for i in range(3)])
    leases = await claim_all(f)
    client = client_of(f, delay_ms=400)
    a, b, c = (PlaceAsk(leases[h], h, ADDRESS, 1) for h in sorted(leases))
    assert (await client.take([a]))[0] == [0]
    waits, _ = await client.take([b, c])
    assert waits == [BLOCK_MS, BLOCK_MS]  # the one place is taken: both wait their turn
    # The response came back: the next start is one delay later, and the host
    # waiting longest is woken for then (its place reserved till then).
    (wake,) = await client.release([PlaceRelease(a.lease.token, ADDRESS, 1, fetch_ms=10, flags=0)])
    assert wake == Wake(b.pkey, 400)
    waits, _ = await client.take([b])
    assert 0 < waits[0] <= 400  # not yet: its place waits for it
    await asyncio.sleep(waits[0] / 1000)
    assert (await client.take([b]))[0] == [0]
    # A 429 doubles the address's penalty: at least 1 s before the next start.
    (wake,) = await client.release([PlaceRelease(b.lease.token, ADDRESS, 1, fetch_ms=10, flags=1)])
    assert wake == Wake(c.pkey, 1000)
    state = await f.redis.hgetall(f.keys.address_state(f.keys.address_shard(ADDRESS), ADDRESS))
    assert int(state[b"pen"]) == 1000


async def test_in_address_mode_one_slow_answer_alone_does_not_raise_the_delay(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(delay_ms=0)
    await f.add([entry(f"http://h{i}.test/") for i in range(3)])
    leases = await claim_all(f)
    timing = AddressTiming(
        lease_ms=10_000,
        reserve_ms=5_000,
        block_ms=BLOCK_MS,
        delay_ms=100,
        adaptive=AdaptiveDelay(factor=5, max_ms=1500),
        host_delay_ms=f.default_delay_ms,
        host_concurrency=f.default_concurrency,
    )
    client = AddressClient(f.redis, f.keys, timing)
    key = f.keys.address_state(f.keys.address_shard(ADDRESS), ADDRESS)
    waits = []
    for h, fetch_ms in zip(sorted(leases), (20, 600, 600), strict=True):
        ask = PlaceAsk(leases[h], h, ADDRESS, 1)
        assert (await client.take([ask]))[0] == [0]
        await client.release(
            [PlaceRelease(ask.lease.token, ADDRESS, 1, fetch_ms=fetch_ms, flags=0)]
        )
        seconds, micros = await f.redis.time()
        waits.append(int(await f.redis.hget(key, "next")) - (seconds * 1000 + micros // 1000))
        await f.redis.hset(key, "next", 0)  # the next place at once
    assert 50 <= waits[0] <= 100  # 5 x 20 ms = the 100 ms delay
    assert 50 <= waits[1] <= 100  # one slow answer: the smaller of 20 and 600 ms
    assert 1450 <= waits[2] <= 1500  # a second: 5 x 600 ms, capped at 1.5 s
    assert int(await f.redis.hget(key, "ft")) == 600


async def test_status_shows_addresses_at_their_cap_and_hosts_waiting(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(delay_ms=0)
    hosts = [f"h{i}.test" for i in range(4)]
    await f.add([entry(f"http://{h}/") for h in hosts])
    leases = await claim_all(f)
    client = client_of(f)
    waits, _ = await client.take([PlaceAsk(leases[h], h, ADDRESS, 1) for h in hosts])
    assert waits == [0] + [BLOCK_MS] * 3
    await client.wait([(leases[h], BLOCK_MS) for h in hosts[1:]])
    status = await collect_status(f.redis, f.keys, lease_ms=10_000)
    section = status["addresses"]
    assert section["at_cap"] == [{"address": ADDRESS, "in_flight": 1}]
    assert section["waited_on"] == [{"address": ADDRESS, "hosts_waiting": 3, "first": hosts[1:]}]
    assert (section["taken"], section["denied"]) == (1, 3)
    assert render(status) is not None  # the tables draw
    await client.release([PlaceRelease(leases[hosts[0]].token, ADDRESS, 1)])
    section = (await collect_status(f.redis, f.keys, lease_ms=10_000))["addresses"]
    assert section["at_cap"] == []  # its place is reserved for h1, not held
    assert section["waited_on"][0]["first"] == hosts[2:]


class Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] = self.values.get(key, 0) + count


async def test_the_gate_follows_the_resolver_and_lets_unresolved_hosts_through(
    make_frontier: MakeFrontier,
) -> None:
    """The worker's side (address_gate.py) with a resolver of our own: each
    claim asks it, so a host whose address changes moves with it; a host
    that does not resolve, and a network left uncapped, get no place."""
    f = await make_frontier(delay_ms=0)
    await f.add(
        [entry(f"http://{h}/{k}") for h in ("a.test", "b.test", "cdn.test") for k in (1, 2)]
    )
    answers = {"a.test": "10.0.0.1", "cdn.test": "192.0.2.9"}  # b.test: no answer

    async def resolve(name: str) -> str | None:
        return answers.get(name)

    config = AddressConfig(4, 1, False, read_address_overrides({"192.0.2.0/24": None}))
    stats = Stats()
    gate = AddressGate(
        config, client_of(f), stats, resolve, host_key, lambda shard: None, asyncio.Event()
    )  # type: ignore[arg-type]

    async def claim_and_admit() -> dict[str, Lease]:
        leases = await claim_all(f)
        claimed = [
            (lease, Request(f"http://{h}/x")) for h, lease in leases.items()
        ]  # the URL's host is what the gate reads
        admitted = await gate.admit(claimed)
        assert admitted.sent_back == [] and admitted.given_back == []
        assert [lease for lease, _ in admitted.granted] == [lease for lease, _ in claimed]
        return leases

    first = await claim_and_admit()
    assert gate.place_of(first["a.test"]) == Place("10.0.0.1", 4)
    assert gate.place_of(first["b.test"]) is None and gate.place_of(first["cdn.test"]) is None
    assert stats.values == {
        "frontier/address_taken": 1,
        "frontier/address_unresolved": 1,
        "frontier/address_uncapped": 1,
    }
    # The fetches end: slots and places freed together.
    releases = [Release(lease, 0, fetch_ms=5) for lease in first.values()]
    await f.release(releases)
    await gate.send(releases)
    assert len(gate) == 0
    # a.test moved: its next claim takes a place at its new address.
    answers["a.test"] = "10.0.0.2"
    second = await claim_and_admit()
    assert gate.place_of(second["a.test"]) == Place("10.0.0.2", 4)
    for address, held in (("10.0.0.1", 0), ("10.0.0.2", 1)):
        key = f.keys.address_places(f.keys.address_shard(address), address)
        assert await f.redis.zcard(key) == held


@pytest.mark.parametrize("cached", [True, False])
async def test_a_name_slow_to_resolve_does_not_hold_up_the_batch(
    make_frontier: MakeFrontier, cached: bool
) -> None:
    """A resolver that does not answer for one name (a lame delegation waits
    out DNS_TIMEOUT): the batch is admitted without it, that name's URL is
    given back with its host held (not contacted), and the lookup goes on, so
    the host's next claim finds its answer: in the resolver's cache, or with
    the cache off (DNSCACHE_ENABLED), the answer the gate kept for it."""
    f = await make_frontier(crawl=f"c{int(cached)}", delay_ms=0)
    await f.add([entry(f"http://{h}/1") for h in ("a.test", "lame.test")])
    answered = asyncio.Event()
    cache: dict[str, str] = {}  # the resolver's cache, unless off
    asked: list[str] = []

    async def resolve(name: str) -> str | None:
        asked.append(name)
        if name == "lame.test" and name not in cache:
            await answered.wait()  # the slow lookup
            if cached:
                cache[name] = "10.0.0.7"
            return "10.0.0.7"
        return cache.get(name, "10.0.0.1")

    stats: Any = Stats()  # the two calls of StatsCollector the gate makes
    gate = AddressGate(
        AddressConfig(4, 1, False, ()), client_of(f), stats, resolve, host_key,
        lambda shard: None, asyncio.Event(),
    )  # fmt: skip
    leases = await claim_all(f)
    claimed = [(lease, Request(f"http://{h}/1")) for h, lease in leases.items()]
    admitted = await asyncio.wait_for(gate.admit(claimed), RESOLVE_HOLD_SECONDS)
    assert [lease for lease, _ in admitted.granted] == [leases["a.test"]]
    assert [(lease, hold) for lease, _, hold in admitted.given_back] == [
        (leases["lame.test"], RESOLVE_HOLD_SECONDS)
    ]
    assert stats.values["frontier/address_resolving"] == 1
    assert gate.place_of(leases["a.test"]) == Place("10.0.0.1", 4)
    answered.set()  # the lookup ends after the batch
    await asyncio.sleep(0.05)  # its task and callbacks run
    assert cache == ({"lame.test": "10.0.0.7"} if cached else {})
    asked.clear()
    answered.clear()  # a new lookup would never end: the next claim must not need one
    again = await asyncio.wait_for(
        gate.admit([(leases["lame.test"], Request("http://lame.test/1"))]), RESOLVE_HOLD_SECONDS
    )
    assert asked == []  # the late answer, kept by the gate for this claim
    assert admitted.sent_back == [] and again.given_back == []
    assert gate.place_of(leases["lame.test"]) == Place("10.0.0.7", 4)
