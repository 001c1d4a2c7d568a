"""The frontier's Lua scripts against a real redis-server (no HTTP, no Scrapy engine)."""

from __future__ import annotations

import asyncio
import time

import pytest

from crawlproject.frontier.basics.urls import UrlCanonicalizer
from crawlproject.frontier.store.redis_frontier import (
    FrontierMismatch,
    Lease,
    NewEntry,
    RedisFrontier,
    Release,
)
from testkit.entries import CODEC
from testkit.entries import entry as make_entry
from tests.conftest import MakeFrontier

CANON = UrlCanonicalizer(["sid"])


def entry(url: str, dont_filter: bool = False) -> NewEntry:
    return make_entry(url, dont_filter=dont_filter, canon=CANON)  # with its sid rule


async def claim_all(frontier: RedisFrontier, n: int = 100) -> list[tuple[Lease, bytes]]:
    items: list[tuple[Lease, bytes]] = []
    for shard in range(frontier.keys.shards):
        items += (await frontier.claim(shard, n, "w1")).items
    return items


def urls_of(items: list[tuple[Lease, bytes]]) -> list[str]:
    return [CODEC.decode(data, None).url for _, data in items]


async def test_one_slot_per_host_and_delay_after_release(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(delay_ms=300)
    await f.add([entry("http://a.test/1"), entry("http://a.test/2"), entry("http://b.test/1")])
    first = await claim_all(f)
    assert sorted(urls_of(first)) == ["http://a.test/1", "http://b.test/1"]
    assert await claim_all(f) == []  # a.test's only slot is taken
    lease_a = next(lease for lease, data in first if b"a.test" in data)
    assert await f.release([Release(lease_a, 0)]) == 1
    assert await f.release([Release(lease_a, 0)]) == 0  # idempotent
    released_at = time.monotonic()
    assert await claim_all(f) == []  # released, but the delay runs from now
    while not (items := await claim_all(f)):
        await asyncio.sleep(0.01)
    assert time.monotonic() - released_at >= 0.29
    assert urls_of(items) == ["http://a.test/2"]


async def test_claim_reports_when_the_next_host_is_due(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=500)
    await f.add([entry("http://a.test/1"), entry("http://a.test/2")])
    batch = await f.claim(0, 10, "w1")
    assert len(batch.items) == 1 and batch.next_ready_ms is None  # busy host: not ready
    await f.release([Release(batch.items[0][0], 0)])
    batch = await f.claim(0, 10, "w1")
    assert batch.items == []
    assert batch.next_ready_ms is not None
    assert 400 <= batch.next_ready_ms - batch.now_ms <= 500


async def test_per_host_concurrency_and_delay(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=1)
    await f.set_host_config("c.test", None, 2)
    await f.add([entry(f"http://c.test/{i}") for i in range(4)])
    assert len(await claim_all(f)) == 1  # one per host per call
    assert len(await claim_all(f)) == 1  # second slot
    assert await claim_all(f) == []  # both slots taken
    await f.set_host_config("c.test", 10_000, None)  # back to 1 slot, 10 s delay
    assert (await f.counters())["leased"] == 2


async def test_seen_urls_are_dropped_unless_dont_filter(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    r = await f.add([entry("http://a.test/x?b=1&a=2"), entry("HTTP://A.test:80/x?a=2&b=1#frag")])
    assert (r.added, r.seen_hits) == (1, 1)
    r = await f.add([entry("http://a.test/x?a=2&b=1", dont_filter=True)])
    assert (r.added, r.seen_hits) == (1, 0)
    counts = await f.counters()
    assert counts["queued"] == 2 and counts["seen_hits"] == 1


async def test_expired_lease_returns_url_to_head(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, lease_ms=200)
    await f.add([entry("http://a.test/1"), entry("http://a.test/2")])
    (lease, _), = await claim_all(f)  # fmt: skip
    assert await f.reclaim(0) == (0, 0)
    await asyncio.sleep(0.25)
    assert await f.reclaim(0) == (1, 0)
    assert urls_of(await claim_all(f)) == ["http://a.test/1"]  # back at the head
    assert await f.ack([lease]) == (0, 1)  # the dead worker's late ack finds nothing
    counts = await f.counters()
    assert counts["reclaimed"] == 1 and counts["leased"] == 1 and counts["queued"] == 1


async def test_renew_keeps_a_lease_alive(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, lease_ms=300)
    await f.add([entry("http://a.test/1")])
    (lease, _), = await claim_all(f)  # fmt: skip
    for _ in range(4):
        await asyncio.sleep(0.15)
        assert await f.renew([lease]) == []
        assert await f.reclaim(0) == (0, 0)
    await asyncio.sleep(0.35)
    assert await f.reclaim(0) == (1, 0)
    assert await f.renew([lease]) == [lease]


async def test_ack_modes(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0)
    await f.add([entry("http://a.test/1"), entry("http://b.test/1"), entry("http://c.test/1")])
    items = await claim_all(f)
    by_host = {CODEC.decode(d, None).url: lease for lease, d in items}
    assert await f.ack([by_host["http://a.test/1"]], "done") == (1, 0)
    assert await f.ack([by_host["http://b.test/1"]], "return") == (1, 0)
    assert await f.ack([by_host["http://c.test/1"]], "dead") == (1, 0)
    assert urls_of(await claim_all(f)) == ["http://b.test/1"]
    assert await f.redis.llen(f.keys.shard_prefixes[0] + "dead") == 1
    counts = await f.counters()
    assert counts["done"] == 1 and counts["leased"] == 1 and counts["queued"] == 0


async def test_layout_is_fixed_per_crawl(make_frontier: MakeFrontier) -> None:
    await make_frontier(crawl="c1", shards=2)
    with pytest.raises(FrontierMismatch, match="shards=2"):
        await make_frontier(crawl="c1", shards=3)


async def test_workers_preparing_a_new_crawl_at_once_agree(
    make_frontier: MakeFrontier, redis_url: str
) -> None:
    # Two workers started together: one may read the layout while the other is
    # writing it. Its partial state must never look like an older version's
    # (which had "shards" and no "queue_layout").
    first = await make_frontier(crawl="race", shards=2)
    meta = await first.redis.hgetall(first.keys.meta)
    written = [k.decode() for k in meta]
    assert written.index("queue_layout") < written.index("shards")
    for _ in range(20):
        await first.redis.delete(first.keys.meta)
        await asyncio.gather(*(make_frontier(crawl="race", shards=2) for _ in range(4)))
    # An older version's crawl is still refused.
    await first.redis.delete(first.keys.meta)
    await first.redis.hset(first.keys.meta, mapping={"created": "1", "shards": "2"})
    with pytest.raises(FrontierMismatch, match="older version"):
        await make_frontier(crawl="race", shards=2)


async def test_start_urls_trim_never_drops_unread_seeds(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    await f.redis.lpush(f.keys.start_urls, b"u1", b"u2")
    a = await f.read_start_urls(10)
    b = await f.read_start_urls(10)  # a second worker read the same seeds
    await f.redis.lpush(f.keys.start_urls, b"u3")
    assert await f.trim_start_urls(a) == 2
    assert await f.trim_start_urls(b) == 0  # already gone: u3 must survive
    assert await f.read_start_urls(10) == [b"u3"]


async def test_two_workers_never_share_a_slot(make_frontier: MakeFrontier) -> None:
    f1 = await make_frontier(shards=1, delay_ms=0)
    f2 = await make_frontier(shards=1, delay_ms=0)
    await f1.add([entry(f"http://h{h}.test/{i}") for h in range(20) for i in range(5)])

    async def worker(f: RedisFrontier, name: str, active: set[str], log: list[int]) -> None:
        while True:
            batch = await f.claim(0, 8, name)
            if not batch.items:
                if (await f.counters())["queued"] == 0:
                    return
                await asyncio.sleep(0.001)
                continue
            hosts = [CODEC.decode(d, None).url.split("/")[2] for _, d in batch.items]
            assert not active & set(hosts), "a host was handed out twice at once"
            active.update(hosts)
            log.append(len(hosts))
            await asyncio.sleep(0.002)
            active.difference_update(hosts)
            await f.ack([lease for lease, _ in batch.items])

    active: set[str] = set()
    log1: list[int] = []
    log2: list[int] = []
    await asyncio.gather(worker(f1, "w1", active, log1), worker(f2, "w2", active, log2))
    assert sum(log1) + sum(log2) == 100
    assert sum(log1) > 0 and sum(log2) > 0


async def test_more_slots_make_a_waiting_host_ready(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=1)
    await f.add([entry("http://c.test/1"), entry("http://c.test/2")])
    assert len(await claim_all(f)) == 1
    assert await claim_all(f) == []  # its one slot is taken
    await f.set_host_config("c.test", None, 2)
    assert urls_of(await claim_all(f)) == ["http://c.test/2"]


async def test_scripts_come_back_after_script_flush(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=2, delay_ms=0)
    await f.add([entry("http://a.test/1")])
    await f.redis.script_flush()  # as after a Redis restart
    assert (await f.add([entry("http://b.test/1")])).added == 1
    items = await claim_all(f)
    await f.redis.script_flush()
    assert await f.ack([lease for lease, _ in items]) == (2, 0)


async def test_delay_runs_from_when_the_response_came(make_frontier: MakeFrontier) -> None:
    # Bounds from the time the calls took (a loaded machine may take tens of ms).
    f = await make_frontier(shards=1, delay_ms=1000)
    await f.add([entry("http://a.test/1"), entry("http://a.test/2")])
    (lease, _), = await claim_all(f)  # fmt: skip
    await asyncio.sleep(0.5)
    # The response came 400 ms ago: due 600 ms from the release, not 1,000.
    t0 = time.monotonic()
    assert await f.release([Release(lease, 400)]) == 1
    batch = await f.claim(0, 10, "w1")
    took_ms = (time.monotonic() - t0) * 1000
    assert batch.next_ready_ms is not None
    assert 600 - took_ms - 2 <= batch.next_ready_ms - batch.now_ms <= 600
    # The floor set at claim time (claim + delay) holds whatever age is reported.
    await f.add([entry("http://a.test/3")])
    await asyncio.sleep(0.65)
    t0 = time.monotonic()
    (lease2, _), = await claim_all(f)  # fmt: skip
    assert await f.release([Release(lease2, 10**9)]) == 1
    batch = await f.claim(0, 10, "w1")
    took_ms = (time.monotonic() - t0) * 1000
    assert batch.next_ready_ms is not None
    assert 1000 - took_ms - 2 <= batch.next_ready_ms - batch.now_ms <= 1000


async def due_in_ms(f: RedisFrontier, shard: int = 0) -> int:
    batch = await f.claim(shard, 0, "w1")
    assert batch.next_ready_ms is not None
    return batch.next_ready_ms - batch.now_ms


async def test_robots_crawl_delay_raises_the_host_delay_never_lowers_it(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(shards=1, delay_ms=300)
    await f.add([entry(f"http://a.test/{i}") for i in range(4)])
    await f.set_robots_delay("a.test", 2000)
    (lease, _), = await claim_all(f)  # fmt: skip
    await f.release([Release(lease, 0)])
    assert 1900 <= await due_in_ms(f) <= 2000
    await f.set_robots_delay("a.test", 100)  # below CRAWL_HOST_DELAY: the default wins
    await f.set_host_config("a.test", None, None)
    await asyncio.sleep(2.05)
    (lease, _), = await claim_all(f)  # fmt: skip
    await f.release([Release(lease, 0)])
    assert 250 <= await due_in_ms(f) <= 300
    assert (await f.host_state("a.test"))["rdelay"] == 100


async def test_adaptive_delay_follows_response_time_and_429_backoff(
    make_frontier: MakeFrontier,
) -> None:
    from crawlproject.frontier.store.redis_frontier import AdaptiveDelay

    f = await make_frontier(shards=1, delay_ms=100)
    f.adaptive = AdaptiveDelay(factor=5, max_ms=1500, backoff_max_ms=4000)
    await f.add([entry(f"http://a.test/{i}") for i in range(10)])
    host = "a.test"

    async def fetch(fetch_ms: int, **kw: object) -> int:
        # Skip the wait: the host is due now.
        await f.redis.hset(f.keys.shard_prefixes[0] + "h:" + host, "next", 0)
        await f.redis.zadd(f.keys.ready(0), {host: 0})
        (lease, _), = await claim_all(f)  # fmt: skip
        await f.release([Release(lease, 0, fetch_ms=fetch_ms, **kw)])  # type: ignore[arg-type]
        return await due_in_ms(f)

    assert 150 <= await fetch(40) <= 200  # 5 x 40 ms
    # One slow answer alone (most often the worker's own stall) does not raise it:
    assert 150 <= await fetch(900) <= 200  # the smaller of 40 and 900 ms
    assert 1450 <= await fetch(900) <= 1500  # a second: 5 x 900 ms, capped at 1.5 s
    assert (await f.host_state(host))["ft"] == 900
    assert 950 <= await fetch(10, throttled=True) <= 1000  # penalty: at least 1 s
    assert 1950 <= await fetch(10, throttled=True) <= 2000  # doubles
    assert 3950 <= await fetch(10, throttled=True) <= 4000  # capped at backoff max
    assert 1950 <= await fetch(10) <= 2000  # then halves with each normal answer
    assert 950 <= await fetch(10) <= 1000
    assert 2950 <= await fetch(10, hold_ms=3000) <= 3000  # Retry-After: 3
    assert (await f.host_state(host)).get("pen") == 500


async def test_requeue_puts_the_url_back_first_and_holds_the_host(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(shards=1, delay_ms=100)
    await f.add([entry("http://a.test/1"), entry("http://a.test/2")])
    (lease, _), = await claim_all(f)  # fmt: skip
    assert await f.release([Release(lease, 0, hold_ms=700, requeue=True)]) == 1
    assert 650 <= await due_in_ms(f) <= 700
    counters = await f.counters()
    assert (counters["queued"], counters["leased"], counters["deferred"]) == (2, 0, 1)
    assert await f.ack([lease]) == (0, 1)  # the lease is gone
    await asyncio.sleep(0.75)
    assert urls_of(await claim_all(f)) == ["http://a.test/1"]


async def test_a_slot_released_without_contact_does_not_wait_a_delay(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(shards=1, delay_ms=5000)
    await f.add([entry(f"http://a.test/{i}") for i in range(3)])
    (lease, _), = await claim_all(f)  # fmt: skip
    assert await f.release([Release(lease, 0, contacted=False)]) == 1
    (lease2, _), = await claim_all(f)  # ready at once: the host saw nothing  # fmt: skip
    assert await f.release([Release(lease2, 0)]) == 1
    assert 4900 <= await due_in_ms(f) <= 5000  # a real fetch: the full delay


async def test_park_host_sets_its_queue_aside(
    make_frontier: MakeFrontier, monkeypatch: pytest.MonkeyPatch
) -> None:
    import crawlproject.frontier.store.parking as parking

    f = await make_frontier(shards=1, delay_ms=0)
    await f.add([entry(f"http://trap.test/{i}") for i in range(5)] + [entry("http://ok.test/1")])
    monkeypatch.setattr(parking, "PARK_BATCH", 2)  # several calls
    assert await f.park_host("trap.test") == 5
    items = await claim_all(f)
    assert urls_of(items) == ["http://ok.test/1"]
    await f.ack([lease for lease, _ in items])
    counters = await f.counters()
    assert (counters["queued"], counters["parked"]) == (0, 5)
    parked = await f.redis.lrange(f.keys.shard_prefixes[0] + "parked", 0, -1)
    assert [p.split(b"\t", 1)[0] for p in parked] == [b"trap.test"] * 5
    assert await f.park_host("trap.test") == 0
    # Set aside for good: URLs found later go straight to the parked list.
    await f.add([entry("http://trap.test/later"), entry("http://ok.test/2")])
    items = await claim_all(f)
    assert urls_of(items) == ["http://ok.test/2"]
    await f.ack([lease for lease, _ in items])
    assert (await f.counters())["parked"] == 6
    assert await f.parked_by_host() == {"trap.test": 6}
    # An operator undoes it: everything back in its queue, in order, flag cleared.
    assert await f.unpark_all() == 6
    assert await f.parked_by_host() == {}
    counters = await f.counters()
    assert (counters["queued"], counters["unparked"]) == (6, 6)
    await f.add([entry("http://trap.test/after")])
    got = []
    for _ in range(7):
        (lease, data), = await claim_all(f)  # fmt: skip
        got.append(urls_of([(lease, data)])[0])
        await f.ack([lease])
    assert got == [f"http://trap.test/{i}" for i in range(5)] + [
        "http://trap.test/later",
        "http://trap.test/after",
    ]
