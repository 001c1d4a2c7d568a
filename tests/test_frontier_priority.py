"""Crawl order in the frontier's Lua scripts (priority queues, due hosts, AOPIC,
per-host caps) against a real redis-server; no HTTP, no Scrapy engine."""

from __future__ import annotations

import asyncio
import collections
import random

import pytest

from crawlproject.frontier.store.operation_values import Lease
from crawlproject.frontier.store.redis_frontier import (
    FrontierMismatch,
    RedisFrontier,
    Release,
)
from testkit.frontier_sim import SyntheticWeb, claim_one, entry, simulated_crawl
from tests.conftest import MakeFrontier


@pytest.fixture
def make(make_frontier: MakeFrontier) -> MakeFrontier:
    """One shard, no delay by default; ``mode``, caps and tax as RedisFrontier options."""

    async def build(
        crawl: str = "p", delay_ms: int = 0, mode: str = "score", host_cap: int = 0,
        pattern_cap: int = 0, tax: float = 0.1,
    ) -> RedisFrontier:  # fmt: skip
        return await make_frontier(
            crawl=crawl, shards=1, delay_ms=delay_ms, lease_ms=10_000, priority_mode=mode,
            aopic_tax=tax, host_url_cap=host_cap, pattern_url_cap=pattern_cap,
        )  # fmt: skip

    return build


async def drain(f: RedisFrontier) -> list[str]:
    """Claims one URL at a time (ack at once) until nothing is left."""
    order = []
    while got := await claim_one(f):
        order.append(got[1])
        await f.ack([got[0]])
    return order


async def test_host_queue_is_ordered_by_band_and_fifo_among_equals(
    make: MakeFrontier,
) -> None:
    f = await make()
    await f.add(
        [
            entry("http://a.test/deep", 3),
            entry("http://a.test/first-1", 1),
            entry("http://a.test/zero", 0),
            entry("http://a.test/first-2", 1),
        ]
    )
    await f.add([entry("http://a.test/first-3", 1), entry("http://a.test/minus", -2)])
    # Scores are bands 0..31: -2 is clamped into band 0, after the URL already there.
    assert await drain(f) == [
        "http://a.test/zero",
        "http://a.test/minus",
        "http://a.test/first-1",
        "http://a.test/first-2",
        "http://a.test/first-3",
        "http://a.test/deep",
    ]


async def test_due_host_with_the_best_url_goes_first_without_breaking_politeness(
    make: MakeFrontier,
) -> None:
    f = await make(delay_ms=300)
    await f.add([entry("http://a.test/1", 5), entry("http://a.test/2", 5)])
    await f.add([entry("http://b.test/1", 1), entry("http://b.test/2", 9)])
    await f.add([entry("http://c.test/1", 3)])
    first = [await claim_one(f) for _ in range(3)]
    assert [g[1] for g in first if g] == ["http://b.test/1", "http://c.test/1", "http://a.test/1"]
    # Every host's slot is taken or its delay runs: b's best (9) and a's (5)
    # wait, however good they are.
    assert await claim_one(f) is None
    await f.release([Release(g[0], 0) for g in first if g])
    assert await claim_one(f) is None  # the delay runs from the release
    await asyncio.sleep(0.35)
    # Both due again: a's 5 beats b's 9.
    got = [await claim_one(f) for _ in range(2)]
    assert [g[1] for g in got if g] == ["http://a.test/2", "http://b.test/2"]


async def test_a_better_url_raises_a_waiting_due_host(make: MakeFrontier) -> None:
    f = await make()
    await f.add([entry("http://a.test/1", 5), entry("http://b.test/1", 2)])
    got = await claim_one(f)  # promotes both hosts to due; b goes
    assert got and got[1] == "http://b.test/1"
    await f.add([entry("http://c.test/1", 1), entry("http://a.test/urgent", 0)])
    assert [(await claim_one(f) or (0, ""))[1] for _ in range(2)] == [
        "http://a.test/urgent",
        "http://c.test/1",
    ]


async def test_equal_best_scores_go_first_due_first(make: MakeFrontier) -> None:
    f = await make()
    for host in ("z", "m", "a"):  # due times 20 ms apart, reverse name order
        await f.add([entry(f"http://{host}.test/1", 1)])
        await asyncio.sleep(0.02)
    assert await drain(f) == ["http://z.test/1", "http://m.test/1", "http://a.test/1"]


async def test_requeue_and_reclaim_keep_priority_and_place(make: MakeFrontier) -> None:
    f = await make()
    await f.add([entry(f"http://a.test/{i}", 1) for i in range(3)])
    got = await claim_one(f)
    assert got and got[1] == "http://a.test/0"
    await f.release([Release(got[0], 0, requeue=True)])  # e.g. its slot fetched robots.txt
    assert await drain(f) == ["http://a.test/0", "http://a.test/1", "http://a.test/2"]
    counters = await f.counters()
    assert (counters["queued"], counters["leased"]) == (0, 0)


async def test_dont_filter_copies_of_a_queued_url_are_kept(make: MakeFrontier) -> None:
    f = await make()
    await f.add([entry("http://a.test/x", 1)])
    r = await f.add([entry("http://a.test/x", 1, dont_filter=True)])
    assert (r.added, r.seen_hits) == (1, 0)
    assert await drain(f) == ["http://a.test/x", "http://a.test/x"]
    assert (await f.counters())["queued"] == 0


async def test_host_cap_counts_and_reports_a_host_once(make: MakeFrontier) -> None:
    f = await make(host_cap=3)
    r = await f.add([entry(f"http://big.test/{i}") for i in range(5)] + [entry("http://s.test/")])
    assert (r.added, r.host_capped, r.newly_capped) == (4, 2, ["big.test"])
    r = await f.add([entry("http://big.test/5"), entry("http://big.test/6")])
    assert (r.added, r.host_capped, r.newly_capped) == (0, 2, [])
    r = await f.add([entry("http://big.test/0", dont_filter=True)])  # a retry is not a new URL
    assert r.added == 1
    assert (await f.counters())["host_capped"] == 4


async def test_pattern_cap_bounds_one_url_shape_per_host(make: MakeFrontier) -> None:
    f = await make(pattern_cap=3)
    calendar = [entry(f"http://cal.test/calendar?month=2026-{m:02d}") for m in range(1, 9)]
    r = await f.add(calendar)
    assert (r.added, r.pattern_capped, r.newly_pattern_capped) == (3, 5, ["cal.test"])
    # Other shapes of the host, and paths without a query, are not limited by it.
    r = await f.add(
        [entry(f"http://cal.test/event?id={i}&view=full") for i in range(3)]
        + [entry(f"http://cal.test/page/{i}") for i in range(6)]
    )
    assert (r.added, r.pattern_capped, r.newly_pattern_capped) == (9, 0, [])


async def test_a_crawl_keeps_its_priority_mode(make: MakeFrontier) -> None:
    await make(crawl="m1", mode="score")
    with pytest.raises(FrontierMismatch, match="priority_mode"):
        await make(crawl="m1", mode="credit")


# -- AOPIC --------------------------------------------------------------------------


async def test_aopic_credit_tax_and_lambda(make: MakeFrontier) -> None:
    f = await make(mode="credit", tax=0.1)
    await f.add([entry("http://a.test/", 1.0), entry("http://b.test/", 1.0)])
    got = await claim_one(f)
    assert got is not None
    lease, url, share = got
    assert url == "http://a.test/" and share == pytest.approx(0.9)  # 10 % to lambda
    # The page's share goes to its links: one new, one queued already (b's seed).
    r = await f.add(
        [entry("http://a.test/x", 0.45), entry("http://b.test/", 0.45, credit_only=True)]
    )
    assert (r.added, r.credited) == (1, 1)
    await f.ack([lease])
    # b's seed now holds 1.45 plus an even part of the lambda cash (0.1 over 2 queued).
    got = await claim_one(f)
    assert got and got[1] == "http://b.test/" and got[2] == pytest.approx((1.45 + 0.05) * 0.9)
    got2 = await claim_one(f)
    assert got2 and got2[1] == "http://a.test/x"
    # 0.45, + 0.05 from the first lambda, + b's tax 0.15 spread over the 1 queued URL.
    assert got2[2] == pytest.approx((0.45 + 0.05 + 0.15) * 0.9)
    # Nothing is queued to spread a/x's tax over: it waits in the lambda cash,
    # and so does credit for a URL no longer queued (not lost).
    await f.add([entry("http://b.test/", 0.3, credit_only=True)])
    cash = float(await f.redis.hget(f.keys.shard_prefixes[0] + "aopic", "cash") or 0)
    assert cash == pytest.approx(0.1 * 0.65 + 0.3)


async def test_aopic_starves_a_minted_url_trap_and_raises_a_popular_page(
    make: MakeFrontier,
) -> None:
    pages = SyntheticWeb().pages()
    claims = pages + pages // 10
    by_policy = {}
    for mode in ("credit", "score"):
        f = await make(crawl=f"sim-{mode}", mode=mode)
        by_policy[mode] = await simulated_crawl(f, claims)
    aopic, depth = by_policy["credit"], by_policy["score"]

    # The page linked from every host comes within the first 10 % of claims.
    assert aopic.index(SyntheticWeb.POPULAR) < claims // 10

    def trap(order: list[str]) -> int:
        return sum(u.startswith("http://trap.test/") for u in order)

    # Breadth-first spends most of its claims in the trap (5^d URLs at depth d)...
    assert trap(depth) > claims // 2
    # ... AOPIC fetches every other page first, with a handful of trap pages
    # among them (its credit shrinks fivefold per hop); only when nothing else
    # is left does the trap get claims (the frontier never idles).
    normal = [i for i, u in enumerate(aopic) if not u.startswith("http://trap.test/")]
    assert len(normal) == len(set(aopic[i] for i in normal)) == pages
    assert trap(aopic[: normal[-1]]) <= pages // 50


async def test_aopic_credit_moves_a_queued_url_up_and_park_keeps_each_url_once(
    make: MakeFrontier,
) -> None:
    f = await make(mode="credit")
    await f.add([entry(f"http://a.test/{i}", 0.01 * (i + 1)) for i in range(4)])
    # A host's URLs go highest credit first: credit moves /0 ahead of the others.
    r = await f.add([entry("http://a.test/0", 0.5, credit_only=True)])
    assert r.credited == 1
    assert await f.park_host("a.test") == 4
    assert await f.parked_by_host() == {"a.test": 4}
    assert await f.unpark_all() == 4
    got = await claim_one(f)
    assert got is not None and got[1] == "http://a.test/0"
    assert got[2] == pytest.approx(0.51 * 0.9)
    await f.release([Release(got[0], 0, requeue=True)])  # back with its band and credit
    assert await drain(f) == [f"http://a.test/{i}" for i in (0, 3, 2, 1)]
    counters = await f.counters()
    assert (counters["queued"], counters["leased"], counters["claims"]) == (0, 0, 5)


async def test_aopic_credits_within_one_add_call_reach_their_urls(make: MakeFrontier) -> None:
    """add.lua writes a host's new URLs and credits once per call: a credit
    for a URL queued earlier in the same call, two links to one queued URL,
    a dont_filter copy of a URL new in the call and credit for a URL already
    fetched all land as they would one link at a time."""
    f = await make(mode="credit", tax=0.0)
    await f.add([entry("http://done.test/", 1.0)])
    got = await claim_one(f)
    assert got is not None and got[1] == "http://done.test/"
    await f.ack([got[0]])
    await f.add([entry("http://a.test/old", 0.1), entry("http://a.test/low", 0.2)])
    r = await f.add(
        [
            entry("http://a.test/new", 0.1),
            entry("http://a.test/new", 0.3),  # seen now: its credit joins the new URL's
            entry("http://a.test/old", 0.25, credit_only=True),
            entry("http://a.test/old", 0.25),  # two links to one queued URL
            entry("http://a.test/new", 0.15, dont_filter=True),  # a copy of its own
            entry("http://done.test/", 0.4),  # fetched: its credit goes to the cash
        ]
    )
    assert (r.added, r.seen_hits, r.credited) == (2, 3, 3)
    cash = float(await f.redis.hget(f.keys.shard_prefixes[0] + "aopic", "cash") or 0)
    assert cash == pytest.approx(0.4)
    got = await claim_one(f)
    assert got is not None and got[1] == "http://a.test/old"
    # 0.6 of its own, and the cash spread over the 4 URLs queued.
    assert got[2] == pytest.approx(0.6 + 0.1)
    await f.ack([got[0]])
    assert await drain(f) == ["http://a.test/new", "http://a.test/low", "http://a.test/new"]
    assert (await f.counters())["queued"] == 0


@pytest.mark.parametrize("seed", range(4))
async def test_a_host_queue_keeps_band_order_small_and_large(make: MakeFrontier, seed: int) -> None:
    """A host's queue against a model (per band, FIFO; a URL put back goes to
    the head of its band) over random adds, claims, acks and URLs put back
    later: a small host keeps one list (`q:<host>`, its bands in order, a URL
    put before the next band's marker), turns to band lists past 32 entries,
    and is small again once empty."""
    rng = random.Random(seed)
    f = await make(crawl=f"forms-{seed}")
    key, hk = f.keys.queue(0, "a.test"), f.keys.shard_prefixes[0] + "h:a.test"
    model: list[collections.deque[str]] = [collections.deque() for _ in range(5)]
    held: list[tuple[Lease, str, int]] = []  # claimed, slot released, not acked
    made, forms = 0, set()
    for _ in range(160):
        r = rng.random()
        if r < 0.5:
            batch = []
            for _ in range(rng.choice((1, 1, 2, 5, 12))):
                band, url = rng.randrange(5), f"http://a.test/{made}"
                made += 1
                batch.append(entry(url, band))
                model[band].append(url)
            assert (await f.add(batch)).added == len(batch)
        elif r < 0.8 and any(model):
            got = await claim_one(f)
            assert got is not None
            band = next(b for b in range(5) if model[b])
            assert got[1] == model[band].popleft()
            await f.release([Release(got[0], 0)])
            held.append((got[0], got[1], band))
        elif held:
            lease, url, band = held.pop(rng.randrange(len(held)))
            if rng.random() < 0.5:  # back to the head of its band, later
                await f.release([Release(lease, 0, requeue=True)])
                model[band].appendleft(url)
            else:
                await f.ack([lease])
        queued = sum(map(len, model))
        assert (await f.counters()).get("queued", 0) == queued
        small = await f.redis.exists(key) == 1
        assert small == (await f.redis.hget(hk, "qc") == b"1" and queued > 0)
        assert not small or queued <= 32
        forms.add(small)
    assert forms == {True, False}  # both forms were crossed
    await f.ack([lease for lease, _, _ in held])
    left = [u for band in model for u in band]
    assert await drain(f) == left
    assert (await f.counters())["queued"] == 0
    # Empty, it is small again; a URL put back into an empty host too.
    await f.add([entry("http://a.test/again", 2)])
    got = await claim_one(f)
    assert got is not None and got[1] == "http://a.test/again"
    await f.release([Release(got[0], 0, requeue=True)])
    assert len(await f.redis.lrange(key, 0, -1)) == 1  # one list, no marker
    assert await f.redis.hget(hk, "qc") == b"1"
    assert await drain(f) == ["http://a.test/again"]
