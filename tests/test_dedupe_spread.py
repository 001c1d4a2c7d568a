"""The duplicate index spread over hash tags (crawlproject/dedupe/spread*.py)
against a real redis-server, and on a real 3-master Redis Cluster: its parts,
their tags and growth. The verdict tests: tests/test_dedupe_index.py."""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator

import numpy as np
import pytest
import redis as sync_redis
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.crc import key_slot
from scrapy.settings import Settings

from crawlproject.dedupe.config import DedupeConfig
from crawlproject.dedupe.index import (
    DedupeIndex,
    DedupeKind,
    DedupeMismatch,
    DedupeVerdict,
    index_figures,
)
from crawlproject.dedupe.spread import (
    DEDUPE_PARTS,
    EXACT,
    HASH_SLOTS,
    Spread,
    linear_address,
    part_tags,
    parts_problem,
)
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.setting_values import ConfigError
from testkit.dedupe_spread_table import part_resp
from testkit.redis_cluster import RedisCluster
from tests.test_dedupe_index import BASE, send_resp

MakeIndex = Callable[..., DedupeIndex]


@pytest.fixture
async def make_index(redis_url: str) -> AsyncIterator[MakeIndex]:
    clients: list[Redis] = []

    def make(
        crawl: str = "t",
        k: int = 3,
        record_originals: bool = True,
        features_version: int = 2,
        **layout: int,
    ) -> DedupeIndex:
        redis = Redis.from_url(redis_url)
        clients.append(redis)
        return DedupeIndex(
            redis,
            CrawlKeys(crawl, 2),
            k=k,
            record_originals=record_originals,
            features_version=features_version,
            **layout,
        )

    yield make
    for c in clients:
        await c.aclose()


def sha1(text: str) -> bytes:
    return hashlib.sha1(text.encode()).digest()


def flip(simhash: int, *bits: int) -> int:
    for b in bits:
        simhash ^= 1 << (63 - b)
    return simhash


def spread_of(index: DedupeIndex) -> Spread:
    assert index.spread is not None, "the index is not spread"
    return index.spread.spread


async def counters(index: DedupeIndex) -> dict[str, int]:
    figures = await index_figures(index.redis, index.keys)
    return {kind: figures[kind] for kind in ("pages", "exact", "near")}


# -- where the parts sit -------------------------------------------------------------------


def test_the_parts_tags_sit_evenly_over_the_slots() -> None:
    """Tag g of the F x P has its slot in the g-th of F x P equal runs, so a
    master owning a range of slots owns that share of every family's parts."""
    for crawl, parts in [("web", 16), ("a-very_long.crawl-name", 4), ("x", 128)]:
        families = (*(f"s{t}" for t in range(10)), "x", "o", "h")
        tags = part_tags(crawl, families, parts)
        assert len(set(tags)) == len(tags) == len(families) * parts
        count = len(tags)
        for g, tag in enumerate(tags):
            slot = key_slot(f"cp:{{{tag}}}:st".encode())
            assert g * HASH_SLOTS // count <= slot < (g + 1) * HASH_SLOTS // count, (crawl, g, tag)
    assert parts_problem(16) is None and parts_problem(1) is None
    assert "power of 2" in (parts_problem(12) or "") and parts_problem(256)
    with pytest.raises(ValueError, match="parts=12"):
        DedupeIndex(Redis(), CrawlKeys("t", 2), parts=12)


def test_a_part_keeps_what_its_level_cannot_hold() -> None:
    """The bits of a page in a part: part + bucket + entry hold the whole
    exact key (80 bits) and the whole near key at every level."""
    sp = Spread("t", 3, 5, 16, 32, 10)
    rng = random.Random(2)
    for _ in range(200):
        digest = rng.randbytes(20)
        part, x, entry = sp.exact_part(digest)
        assert entry == digest[2:10] and 0 <= part < 16
        low = x % (1 << sp.exact_min())
        rebuilt = (part << sp.exact_min() | low).to_bytes(2, "big") + (
            x >> sp.exact_min()
        ).to_bytes(4, "little")
        assert rebuilt == digest[:6]
        for level in range(sp.exact_min(), sp.exact_max()):
            at, mask = sp.exact_split_bit(level)
            assert bool(entry[at - 1] & mask) == bool(x >> level & 1)
        simhash = rng.getrandbits(64)
        for t in range(len(sp.tables)):
            part, key = sp.near_part(t, simhash)
            assert key == sp.tables[t].key(simhash) and part == key >> (sp.table_width(t) - 4)
            for level in range(sp.near_min(), sp.near_max(t)):
                at, mask = sp.near_split_bit(t, level)
                assert bool(simhash.to_bytes(8, "big")[at - 1] & mask) == bool(key >> level & 1)


# -- verdicts ---------------------------------------------------------------------------------


async def test_a_new_index_is_spread_and_counts_its_pages(make_index: MakeIndex) -> None:
    index = make_index()
    first = await index.check_and_add(sha1("body"), BASE, "http://a.test/1", "http://a.test")
    assert first == DedupeVerdict(DedupeKind.NEW, None, None, 0)
    again = await index.check_and_add(sha1("body"), BASE, "http://a.test/2", "http://a.test")
    assert again == DedupeVerdict(DedupeKind.EXACT, "http://a.test/1", 0, 1)
    near = await index.check_and_add(
        sha1("near"), flip(BASE, 9), "http://a.test/3", "http://a.test"
    )
    assert near == DedupeVerdict(DedupeKind.NEAR, "http://a.test/1", 1, 2)
    assert await counters(index) == {"pages": 1, "exact": 1, "near": 1}
    cfg = await index.redis.hgetall(index.keys.dedupe_config)
    assert cfg == {
        b"k": b"3",
        b"fv": b"2",
        b"b": b"5",
        b"load": b"32",
        b"nmin": b"10",
        b"parts": str(DEDUPE_PARTS).encode(),
    }
    figures = await index_figures(index.redis, index.keys)
    assert (figures["layout"], figures["near_tables"], figures["parts"]) == ("growing", 10, 16)
    # Nothing under the cfg's prefix ``cp:{C/dd}:`` but the cfg.
    assert await index.redis.keys(index.keys.dedupe_prefix + "*") == [
        index.keys.dedupe_config.encode()
    ]


async def test_exact_only_pages_and_originals(make_index: MakeIndex) -> None:
    index = make_index()
    pdf = await index.check_and_add(sha1("pdf"), None, "http://a.test/a.pdf", "h")
    assert pdf.kind is DedupeKind.NEW
    again = await index.check_and_add(sha1("pdf"), None, "http://a.test/b.pdf", "h")
    assert (again.kind, again.original) == (DedupeKind.EXACT, "http://a.test/a.pdf")
    await index.check_and_add(sha1("html"), BASE, "http://a.test/page", "h")
    same = await index.check_and_add(sha1("html"), None, "http://a.test/raw", "h")
    # Its original was recorded under its SimHash, which this copy lacks: no
    # URL is found for the body, as when its judge died before recording one
    # (test_a_body_stored_without_its_url_is_no_lost_page): kept as new.
    assert (same.kind, same.original, same.unrecorded) == (DedupeKind.NEW, None, True)
    later = await index.check_and_add(sha1("pdf"), BASE ^ 0xFFFF_FFFF, "http://a.test/c", "h")
    assert (later.kind, later.original) == (DedupeKind.EXACT, "http://a.test/a.pdf")
    # Without originals: verdicts, no URLs, no o: keys.
    bare = make_index("bare", record_originals=False)
    await bare.check_and_add(sha1("a"), BASE, "http://a.test/1", "h")
    exact = await bare.check_and_add(sha1("a"), BASE, "http://a.test/2", "h")
    near = await bare.check_and_add(sha1("b"), flip(BASE, 9), "http://a.test/3", "h")
    assert (exact, near) == (
        DedupeVerdict(DedupeKind.EXACT, None, 0, 1),
        DedupeVerdict(DedupeKind.NEAR, None, 1, 2),
    )
    names = await bare.redis.keys("cp:{bare/dd/*")
    assert names and not [n for n in names if b"}:o:" in n]


async def test_a_body_stored_without_its_url_is_no_lost_page(make_index: MakeIndex) -> None:
    """A worker that dies between the exact check (the body stored) and the
    record of the page's URL leaves a body no page names: the URL comes back
    to another worker (its lease), whose check must keep the page, not judge
    it a copy of nothing (its links would never be followed). A copy judged
    while its original's URL is a round trip away still is a copy (the
    concurrent test): only a body still unnamed after the waits is new."""
    # The dead worker's state: the body stored, no URL recorded for it (an
    # index writing no originals stores exactly the body and its SimHash).
    dead = make_index("orphan", record_originals=False)
    assert (
        await dead.check_and_add(sha1("x"), BASE, "http://a.test/x", "h")
    ).kind is DedupeKind.NEW
    index = make_index("orphan")
    again = await index.check_and_add(sha1("x"), BASE, "http://a.test/x", "h")
    assert (again.kind, again.original, again.unrecorded) == (DedupeKind.NEW, None, True)
    # Its URL is recorded now: a copy names it, and it is itself again.
    copy = await index.check_and_add(sha1("x"), BASE, "http://a.test/y", "h")
    assert (copy.kind, copy.original) == (DedupeKind.EXACT, "http://a.test/x")
    assert (await index.check_and_add(sha1("x"), BASE, "http://a.test/x", "h")).same_url
    # The recheck is counted as a new page (a dead worker's tally never ran;
    # the bare index above did tally its own: 2), the copy as exact.
    figures = await counters(index)
    assert (figures["pages"], figures["exact"]) == (2, 1)


async def test_the_streak_counts_duplicates_per_host(make_index: MakeIndex) -> None:
    index = make_index()
    a, b = "http://a.test", "http://b.test"
    urls = iter(range(100))

    async def check(body: str, simhash: int | None, host: str) -> int:
        # Each check its own URL: a copy, not its own page checked again.
        url = f"{host}/{body}/{next(urls)}"
        return (await index.check_and_add(sha1(body), simhash, url, host)).host_streak

    assert await check("p1", BASE, a) == 0
    assert await check("p1", BASE, a) == 1
    assert await check("p2", flip(BASE, 1), a) == 2
    assert await check("p3", flip(BASE, 2, 3), b) == 1
    assert await check("p1", BASE, a) == 3
    assert await check("fresh", ~BASE & (1 << 64) - 1, a) == 0
    assert await check("p1", BASE, a) == 1
    assert await check("p1", BASE, b) == 2


async def test_in_one_batch_pages_are_judged_one_after_the_other(make_index: MakeIndex) -> None:
    """A batch's near copies of its own earlier page are near it, its exact
    copies exact, as if judged one after the other."""
    index = make_index()
    pages = [
        (sha1("a"), BASE, "http://a.test/a", "h"),
        (sha1("b"), flip(BASE, 4, 40), "http://a.test/b", "h"),
        (sha1("a"), BASE, "http://a.test/a2", "h"),
        (sha1("c"), flip(BASE, 4, 40, 50, 60), "http://a.test/c", "h"),
    ]
    got = await index.check_and_add_many(pages)
    assert [(v.kind, v.distance, v.original) for v in got] == [
        (DedupeKind.NEW, None, None),
        (DedupeKind.NEAR, 2, "http://a.test/a"),
        (DedupeKind.EXACT, 0, "http://a.test/a"),
        (DedupeKind.NEW, None, None),  # 4 bits from a; 2 from b, which is not stored
    ]


async def test_concurrent_copies_exact_once_near_never_neither(make_index: MakeIndex) -> None:
    """Four workers, twenty copies at once: of one body exactly one is new; of
    near copies at least one is new, and every copy judged names a new page."""
    for round_ in range(5):
        indexes = [make_index(f"c{round_}") for _ in range(4)]
        rng = random.Random(round_)
        calls, urls = [], []
        for n in range(20):
            body = "same" if n % 4 == 0 else f"copy{n}"
            simhash = BASE if n % 4 == 0 else flip(BASE, rng.randrange(64))
            urls.append(f"http://a.test/{n}")
            calls.append(indexes[n % 4].check_and_add(sha1(body), simhash, urls[-1], "h"))
        verdicts = await asyncio.gather(*calls)
        # The body's copies: one new, or all near a page kept (none stored twice).
        same = [v.kind for n, v in enumerate(verdicts) if n % 4 == 0]
        assert same.count(DedupeKind.NEW) == 1 or same == [DedupeKind.NEAR] * 5, same
        new_urls = {u for u, v in zip(urls, verdicts, strict=True) if v.kind is DedupeKind.NEW}
        assert new_urls
        for v in verdicts:
            if v.kind is not DedupeKind.NEW:
                # Its original's URL may not be written yet (another worker's
                # step 3): None then, never a page that was not kept.
                assert v.original is None or v.original in new_urls
                assert v.host_streak >= 1
        figures = await counters(indexes[0])
        assert figures["pages"] == len(new_urls)
        assert figures["exact"] + figures["near"] == 20 - len(new_urls)


async def check_placement(index: DedupeIndex) -> int:
    """Every entry sits in its part and in the bucket its key selects at its
    table's level in that part; returns the entries seen."""
    sp, r = spread_of(index), index.redis
    seen = 0
    for table in [None, *range(len(sp.tables))]:
        for part in range(sp.parts):
            if table is None:
                prefix = sp.prefix(EXACT, part)
                state, first, pattern = prefix + "st", sp.exact_min(), "x:*"
            else:
                prefix = sp.prefix(sp.near_family(table), part)
                state, first = sp.near_state(table, part), sp.near_min()
                pattern = f"s:{table}:*"
            st = await r.hgetall(state)
            level, split = int(st.get(b"L", first)), int(st.get(b"s", 0))
            total = 0
            for name in await r.keys(prefix.replace("{", "[{]") + pattern):
                a = int(name.decode().rsplit(":", 1)[1], 16)
                data = await r.get(name)
                assert data and len(data) % 8 == 0
                for i in range(0, len(data), 8):
                    entry = data[i : i + 8]
                    if table is None:
                        low = sp.exact_min()
                        x = a % (1 << low) | int.from_bytes(entry[:4], "little") << low
                        where = part
                    else:
                        where, x = sp.near_part(table, int.from_bytes(entry, "big"))
                    assert where == part, (name, i)
                    assert linear_address(x, level, split) == a, (name, i, level, split)
                    total += 1
            assert total == int(st.get(b"n", 0)), (table, part)
            seen += total
    return seen


@pytest.mark.parametrize("k", [1, 3])
async def test_parts_split_as_they_grow_and_lose_nothing(make_index: MakeIndex, k: int) -> None:
    """A load of 2 and 4 parts from level 0: every part splits many times;
    verdicts match a brute-force reference and every entry is in its place."""
    index = make_index(k=k, load=2, near_min_level=2, parts=4)
    rng = random.Random(200 + k)
    stored: list[tuple[int, bytes]] = []
    expected: list[tuple[DedupeKind, int | None]] = []
    pages: list[tuple[bytes, int | None, str, str]] = []
    for n in range(1500):
        url = f"http://a.test/{n}"
        roll = rng.random()
        if stored and roll < 0.1:
            simhash, digest = rng.choice(stored)
            expected.append((DedupeKind.EXACT, 0))
        else:
            if stored and roll < 0.5:
                simhash = flip(rng.choice(stored)[0], *rng.sample(range(64), rng.randint(0, k + 2)))
            else:
                simhash = rng.getrandbits(64)
            digest = sha1(url)
            best = min((bin(s ^ simhash).count("1") for s, _ in stored), default=k + 1)
            if best <= k:
                expected.append((DedupeKind.NEAR, best))
            else:
                expected.append((DedupeKind.NEW, None))
                stored.append((simhash, digest))
        pages.append((digest, simhash, url, "h"))
    got: list[DedupeVerdict] = []
    for start in range(0, len(pages), 50):
        got += await index.check_and_add_many(pages[start : start + 50])
    assert [(v.kind, v.distance) for v in got] == expected
    sp = spread_of(index)
    assert await check_placement(index) == len(stored) * (len(sp.tables) + 1)
    levels = [int(await index.redis.hget(sp.near_state(0, p), "L") or 0) for p in range(sp.parts)]
    assert min(levels) >= 5, levels  # from level 0: 2 x load x 2^L entries at most
    assert (await counters(index))["pages"] == len(stored)


# -- a worker of another layout -------------------------------------------------------------


async def test_a_part_made_by_another_layout_refuses_a_worker(make_index: MakeIndex) -> None:
    """A part made by another layout refuses a worker, before it writes."""
    spread = make_index("s")
    await spread.check_and_add(sha1("a"), BASE, "http://a.test/a", "h")
    tampered = spread_of(spread)
    part, _, _ = tampered.exact_part(sha1("c"))
    await spread.redis.hset(tampered.prefix(EXACT, part) + "st", "sig", "k3.fv2.b6.P16.l32.m10")
    with pytest.raises(DedupeMismatch, match=r"dedupe index layout: part k3\.fv2\.b6"):
        await spread.check_and_add(sha1("c"), None, "http://a.test/c", "h")
    assert (await counters(spread))["pages"] == 1


# -- on a real Redis Cluster ------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    nodes = RedisCluster().start()
    try:
        yield nodes
    finally:
        nodes.stop()


def node_work(cluster: RedisCluster) -> dict[int, tuple[int, int]]:
    """Per master port: (keys, script calls) since its stats were reset."""
    out = {}
    for port in cluster.masters().values():
        client = sync_redis.Redis(port=port)
        try:
            stats = client.info("commandstats")
            calls = int(stats.get("cmdstat_evalsha", {}).get("calls", 0))
            out[port] = (int(client.dbsize()), calls)
        finally:
            client.close()
    return out


async def test_on_a_cluster_the_index_spreads_over_the_masters(cluster: RedisCluster) -> None:
    """3,000 pages on 3 masters: the verdicts of one server, every master holds
    part of the index and runs part of its calls, none more than 1.5 x the mean."""
    port = cluster.masters()[next(iter(cluster.masters()))]
    client = AsyncRedisCluster(host="127.0.0.1", port=port)
    for p in cluster.masters().values():
        sync_redis.Redis(port=p).config_resetstat()
    index = DedupeIndex(client, CrawlKeys("web", 4), k=3)
    rng = random.Random(11)
    pages = [
        (rng.randbytes(20), rng.getrandbits(64), f"http://h{n % 50}.test/{n}", f"h{n % 50}")
        for n in range(3000)
    ]
    try:
        for start in range(0, len(pages), 64):
            verdicts = await index.check_and_add_many(pages[start : start + 64])
            assert {v.kind for v in verdicts} == {DedupeKind.NEW}
        copies = [
            (rng.randbytes(20), flip(s, *rng.sample(range(64), 3)), f"copy{n}", "c")
            for n, (_, s, _, _) in enumerate(pages[:200])
        ] + [(d, s, f"again{n}", "c") for n, (d, s, _, _) in enumerate(pages[200:400])]
        got = await index.check_and_add_many(copies)
        assert [(v.kind, v.original) for v in got] == [
            (DedupeKind.NEAR, u) for _, _, u, _ in pages[:200]
        ] + [(DedupeKind.EXACT, u) for _, _, u, _ in pages[200:400]]
        figures = await index_figures(client, index.keys)
        assert (figures["pages"], figures["near"], figures["exact"]) == (3000, 200, 200)
    finally:
        await client.aclose()
    work = node_work(cluster)
    keys = [n for n, _ in work.values()]
    calls = [c for _, c in work.values()]
    assert all(n > 0 for n in keys) and all(c > 0 for c in calls), work
    for figures in (keys, calls):
        mean = sum(figures) / len(figures)
        assert max(figures) <= 1.5 * mean, work
    # Every key of the index is in a part's tag, the cfg aside.
    sp = spread_of(index)
    tags = Counter(key_slot(p.encode()) for p in sp.all_prefixes())
    assert len(tags) == len(sp.all_prefixes())


async def test_the_benchmark_model_builds_the_scripts_strings(
    make_index: MakeIndex, redis_url: str
) -> None:
    """testkit/dedupe_spread_table.py (bench/dedupe_index.py's loader) and the
    spread scripts leave the same buckets, part states and originals for the
    same new pages, splits included (a load of 1, 4 parts)."""
    n = 6000
    rng = np.random.default_rng(8)
    digests = rng.integers(0, 256, size=(n, 10), dtype=np.uint8)
    sims = np.frombuffer(rng.bytes(8 * n), dtype=">u8").astype(np.uint64)
    urls = np.frombuffer(b"".join(b"http://a.test/%06d" % i for i in range(n)), dtype=np.uint8)
    urls = urls.reshape(n, -1)
    script = make_index("script", load=1, near_min_level=2, parts=4)
    pages = [
        (bytes(d) + bytes(10), int(s), bytes(u).decode(), "h")
        for d, s, u in zip(digests, sims, urls, strict=True)
    ]
    for start in range(0, n, 100):  # at most 64 splits a part a batch (SPLITS_PER_BATCH)
        verdicts = await script.check_and_add_many(pages[start : start + 100])
        assert {v.kind for v in verdicts} == {DedupeKind.NEW}
    sp = spread_of(script)
    model = Spread("model", sp.k, sp.blocks, sp.parts, sp.load, sp.near_min_level)
    chunks = part_resp(model, script.spread.signature if script.spread else "", digests, sims, urls)
    send_resp(redis_url, b"".join(resp for _, resp in chunks))
    r = script.redis

    async def contents(layout: Spread) -> dict[tuple[str, int, bytes], object]:
        out: dict[tuple[str, int, bytes], object] = {}
        for family in layout.families[:-1]:  # the hosts' counters aside
            for part in range(layout.parts):
                prefix = layout.prefix(family, part)
                names = await r.keys(prefix.replace("{", "[{]") + "*")
                pipe = r.pipeline(transaction=False)  # one round trip a part, not two a key
                for name in names:
                    pipe.type(name)
                types = await pipe.execute()
                for name, kind in zip(names, types, strict=True):
                    if kind == b"hash":
                        pipe.hgetall(name)
                    else:
                        pipe.get(name)
                for name, value in zip(names, await pipe.execute(), strict=True):
                    out[(family, part, name[len(prefix) :])] = value
        return out

    ours, theirs = await contents(sp), await contents(model)
    assert len(ours) > 1000 and ours == theirs


async def test_a_store_failing_after_the_verdicts_is_counted_not_raised(
    make_index: MakeIndex,
) -> None:
    # The originals key a new page's URL goes to is a string (what a failing
    # store meets: WRONGTYPE): the verdict stands, the failure is counted once.
    index = make_index("storefail")
    await index.check_and_add(sha1("warm"), BASE, "http://a.test/warm", "h")  # opens the index
    digest = sha1("new page")
    okey, _ = spread_of(index).originals_of(digest[:8])
    await index.redis.set(okey, "not a hash")
    verdict = await index.check_and_add(digest, None, "http://a.test/new", "h")
    assert verdict.kind is DedupeKind.NEW
    assert index.take_store_failures() == Counter({"originals": 1})
    assert index.take_store_failures() == Counter()  # taken: counted once
    copy = await index.check_and_add(digest, None, "http://a.test/copy", "h")
    assert (copy.kind, copy.original) == (DedupeKind.EXACT, None)  # its URL was not stored


async def test_the_part_count_is_a_setting_fixed_when_the_index_is_made(
    make_index: MakeIndex,
) -> None:
    first = make_index("parts64", parts=64)
    await first.check_and_add(sha1("a"), BASE, "http://a.test/a", "h")
    assert await first.redis.hget(first.keys.dedupe_config, "parts") == b"64"
    assert len(spread_of(first).all_prefixes()) == 7 * 64  # k + 1 groups, exact, originals, hosts
    later = make_index("parts64")  # the default, 16: the index's 64 are used
    copy = await later.check_and_add(sha1("a"), BASE, "http://a.test/b", "h")
    assert (copy.kind, copy.original) == (DedupeKind.EXACT, "http://a.test/a")
    assert spread_of(later).parts == 64


def test_a_part_count_that_cannot_be_is_refused_at_start() -> None:
    for bad, why in ((12, "power of 2"), (256, "within 1..128"), (-1, "power of 2")):
        settings = Settings({"CRAWL_DEDUPE_PARTS": bad})
        with pytest.raises(ConfigError, match=f"CRAWL_DEDUPE_PARTS={bad}: .*{why}"):
            DedupeConfig.from_settings(settings).validate()
    for good in (1, 64, 128):  # 0 (one tag): tests/test_dedupe_migrate.py
        DedupeConfig.from_settings(Settings({"CRAWL_DEDUPE_PARTS": good})).validate()
