"""The frontier's seen set (crawlproject/frontier/store/lua/_seen.lua, seen_set.py) on a
real redis-server: exact across growth, Bloom within its error rate, old
crawls and conflicting settings refused."""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from redis.asyncio import Redis as AsyncRedis
from scrapy.settings import Settings

from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.hash_slots import PLAIN
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import FrontierMismatch, NewEntry
from crawlproject.frontier.store.seen_set import (
    BLOCK_BYTES,
    INTSET_ENTRIES_NEEDED,
    MAX_SEGMENT_BYTES,
    BloomShape,
    SeenFilter,
    SeenWatch,
    blocked_fp_rate,
    prepare_seen,
    seen_figures,
    size_class,
)
from crawlproject.status.view import collect_status
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.seen_table import (
    SEEN_DRIVER,
    address,
    bloom_positions,
    exact_buckets,
    load_bloom,
    load_exact,
    member,
    stored_buckets,
    stored_fingerprints,
    table_size,
)
from testkit.testweb import TestWeb, page_counts
from tests.conftest import MakeFrontier

KEYS = CrawlKeys("t", 1)
PREFIX = KEYS.shard_prefixes[0]  # the crawl's one shard, as make_frontier(crawl="t", shards=1)
EXACT = SeenFilter().script_arg(1)


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_server.url)
    yield c
    c.close()


class Driver:
    """The real _seen.lua on one shard, a batch of fingerprints per call."""

    def __init__(self, client: redis.Redis, spec: str = EXACT, prefix: str = PREFIX) -> None:
        self.script = client.register_script(SEEN_DRIVER)
        self.spec = spec
        self.prefix = prefix

    def __call__(self, fps: list[bytes]) -> list[bool]:
        out = self.script(keys=[self.prefix + "ready"], args=[self.prefix, self.spec, *fps])
        return [c == ord("1") for c in out]


def fingerprints(rng: random.Random, n: int) -> list[bytes]:
    return [rng.randbytes(8) for _ in range(n)]


def as_array(fps: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(fps), dtype=np.uint8).reshape(-1, 8)


DISTINCT = 1_100_000  # past 2^13 buckets of SPLIT_LOAD (128): level 13


def test_exact_set_against_a_python_set_across_millions_and_splits(client: redis.Redis) -> None:
    """1.1M distinct fingerprints, 30 % of the calls re-adds of earlier ones, in
    batches: every answer is the Python set's, across the ~6,500 splits and
    two levels (11 -> 13) the table grows through; every bucket stays an
    intset, and the model builds the same sets (what bench/frontier_growth.py
    loads).

    Why 1.1M is enough: what is tested is the split (a bucket of one level
    parted by bit L into s and s + 2^L, while the other buckets keep their
    level), ~6,500 times, and the passage to the next level (s back to 0,
    L + 1), twice; past 2^13 x 128 = 1,048,576 adds a third level is the
    same code again. It was 2.1M (three levels, 117 s of
    a CI run, the suite's second longest test)."""
    rng = random.Random(18)
    drive = Driver(client)
    known: set[bytes] = set()
    order: list[bytes] = []
    answers = readds = 0
    while len(order) < DISTINCT:
        batch = fingerprints(rng, 14_000)
        batch += [order[rng.randrange(len(order))] for _ in range(6_000 if order else 0)]
        rng.shuffle(batch)
        expected = []
        for fp in batch:
            expected.append(fp in known)
            if fp not in known:
                known.add(fp)
                order.append(fp)
        got = drive(batch)
        assert got == expected, f"first wrong answer at {got.index(not got[0])}"
        answers += len(batch)
        readds += sum(expected)
    assert readds >= 0.2 * answers
    level, split = table_size(len(order))
    state = client.hgetall(PREFIX + "seen")
    assert state == {b"L": str(level).encode(), b"s": str(split).encode(),
                     b"n": str(len(order)).encode()}  # fmt: skip
    assert level == 13 and split > 0  # grew from 2^11 buckets through two levels
    stored = stored_buckets(client, KEYS, 0)
    model = {bucket: set(members.tolist()) for bucket, members in exact_buckets(as_array(order))}
    assert stored == model
    assert stored_fingerprints(client, KEYS, 0) == known
    assert client.dbsize() == 1 + len(model)  # `seen`, a set per bucket
    assert max(len(m) for m in model.values()) < INTSET_ENTRIES_NEEDED
    for bucket in list(model)[:: len(model) // 50]:
        assert client.object("encoding", f"{PREFIX}seen:{bucket}") == b"intset"


def test_exact_set_keeps_identity_over_all_64_bits(client: redis.Redis) -> None:
    """Adversarial fingerprints: one suffix under every 2-byte prefix, the same
    under every 2-byte ending, and 3,000 in one bucket (same first 6 bytes:
    no split separates them, and Redis keeps that one set as a hash table): each
    is its own URL."""
    drive = Driver(client)
    suffix = bytes.fromhex("a1b2c3d4e5f6")
    same_suffix = [i.to_bytes(2, "big") + suffix for i in range(65_536)]
    assert not any(drive(same_suffix))
    assert all(drive(same_suffix))
    same_start = [suffix + i.to_bytes(2, "big") for i in range(65_536)]  # x equal too
    assert not any(drive(same_start))
    assert all(drive(same_start))
    other_suffix = [fp[:7] + bytes([fp[7] ^ 1]) for fp in same_suffix[::7]]
    assert not any(drive(other_suffix))
    head = bytes.fromhex("0011223344ff")  # x equal: one bucket however deep
    one_bucket = [head + i.to_bytes(2, "big") for i in range(3000)]
    assert not any(drive(one_bucket))
    assert all(drive(one_bucket[::-1]))
    known = set(same_suffix + same_start + other_suffix + one_bucket)
    assert stored_fingerprints(client, KEYS, 0) == known
    level, split = table_size(len(known))
    assert len(stored_buckets(client, KEYS, 0)[address(one_bucket[0], level, split)]) >= 3000
    # A fingerprint one bit away from a stored one, not stored itself, is new.
    flips = set()
    for fp in (same_suffix[3], same_start[5], one_bucket[7]):
        v = int.from_bytes(fp, "little")
        flips |= {(v ^ (1 << i)).to_bytes(8, "little") for i in range(64)}
    probes = sorted(flips - known)
    assert len(probes) > 100
    assert not any(drive(probes))


async def test_add_script_tests_seen_urls_with_the_same_table(
    make_frontier: MakeFrontier, client: redis.Redis
) -> None:
    """Through RedisFrontier.add (add.lua): 12,000 URLs over 2 shards, then again
    with 4,000 new ones mixed in; counts match, and each shard's table is the
    model's for the fingerprints it received."""
    f = await make_frontier(shards=2)
    rng = random.Random(3)
    fps = fingerprints(rng, 16_000)
    hosts = [f"h{i}.test" for i in range(50)]

    def new(fp: bytes, i: int) -> NewEntry:
        return NewEntry(hosts[i % 50], fp, False, b'{"url":"http://h.test/%d"}' % i)

    first = [new(fp, i) for i, fp in enumerate(fps[:12_000])]
    r = await f.add(first)
    assert (r.added, r.seen_hits) == (12_000, 0)
    again = [new(fp, i) for i, fp in enumerate(fps)]
    rng.shuffle(again)
    r = await f.add(again)
    assert (r.added, r.seen_hits) == (4_000, 12_000)
    per_shard: dict[int, list[bytes]] = {0: [], 1: []}
    for e in again:
        per_shard[f.keys.shard_of(e.pkey)].append(e.fingerprint)
    for shard, got in per_shard.items():
        model = {b: set(m.tolist()) for b, m in exact_buckets(as_array(got))}
        assert stored_buckets(client, f.keys, shard) == model
        assert client.hget(f.keys.seen_state(shard), "n") == str(len(got)).encode()
    assert member(fps[0]) == int.from_bytes(fps[0], "little") >> 11


def test_loaded_table_answers_like_the_script_built_it(client: redis.Redis) -> None:
    rng = random.Random(5)
    fps = fingerprints(rng, 50_000)
    load_exact(client, KEYS, 0, as_array(fps))
    drive = Driver(client)
    assert all(drive(fps[::3]))
    fresh = fingerprints(rng, 5000)
    assert not any(drive(fresh))
    assert all(drive(fresh))


async def test_a_redis_that_would_not_keep_buckets_as_intsets_is_refused(
    make_frontier: MakeFrontier, client: redis.Redis
) -> None:
    """set-max-intset-entries below what a bucket holds would keep the exact
    set's buckets as hash tables (several times the memory): refused at start."""
    client.config_set("set-max-intset-entries", 128)
    try:
        with pytest.raises(FrontierMismatch) as refused:
            await make_frontier(crawl="small")
        assert "set-max-intset-entries is 128" in str(refused.value)
        assert "CRAWL_SEEN_FILTER = 'bloom'" in str(refused.value)
        assert client.hget("cp:{small}:meta", "seen_layout") is None  # nothing written
        await make_frontier(crawl="bloomy", seen=SeenFilter("bloom", 10_000))  # no sets
    finally:
        client.config_set("set-max-intset-entries", INTSET_ENTRIES_NEEDED)
    assert (await make_frontier(crawl="small2")).seen.kind == "exact"


async def test_a_redis_without_config_get_is_taken_at_the_default(
    redis_server_factory: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    """A managed Redis may not answer CONFIG (renamed away here): the exact set
    is used, on Redis's default, and the log says what could not be checked."""
    server = redis_server_factory(extra_args=["--rename-command", "CONFIG", ""])
    r = AsyncRedis.from_url(server.url)
    try:
        with caplog.at_level(logging.INFO, logger="crawlproject.frontier.store.seen_set"):
            await prepare_seen(r, CrawlKeys("m", 1), SeenFilter())
        assert await r.hget("cp:{m}:meta", "seen_layout") == b"exact3"
    finally:
        await r.aclose()
    assert any("set-max-intset-entries" in m for m in caplog.messages)


# -- Bloom ------------------------------------------------------------------------


def test_bloom_shape_stays_within_two_bytes_per_url() -> None:
    assert [size_class(n) for n in (1, 9, 100, 129, 449_000, 2**21)] == [
        8, 16, 112, 160, 458_752, 2**21,
    ]  # fmt: skip
    for capacity, shards in ((200_000, 1), (1_000_000, 4), (10**7, 4), (10**8, 4), (10**9, 16)):
        b = BloomShape.of(capacity, 0.001, shards)
        allocated = b.segments * size_class(b.segment_bytes + 16) * shards
        assert allocated / capacity <= 2.0, (capacity, allocated / capacity)
        assert b.segment_bytes <= MAX_SEGMENT_BYTES
        assert b.segment_bytes == b.per_segment * BLOCK_BYTES
        # sized for the configured rate at capacity (a blocked filter: a few % more bits)
        assert b.expected_fp_rate(b.per_shard) <= 0.001
        assert b.blocks * BLOCK_BYTES * 8 / b.per_shard < 1.03 * -math.log(0.001) / math.log(2) ** 2
    # Blocks of 4,096 bits cost little: at the same bits per URL, the rate of a
    # standard filter (1 - e^(-kn/m))^k is within 10 %.
    standard = (1 - math.exp(-10 / 14.4)) ** 10
    assert standard < blocked_fp_rate(4096 / 14.4, 10) < 1.1 * standard


async def test_bloom_false_positives_within_the_configured_rate(
    make_frontier: MakeFrontier, client: redis.Redis
) -> None:
    """Capacity 200,000 on one shard: after 200,000 URLs every one of them is
    seen, and of 200,000 others the ones called seen are about the expected
    number (well within the configured 0.001)."""
    seen = SeenFilter("bloom", 200_000, 0.001)
    shape = seen.bloom(1)
    await make_frontier(shards=1, seen=seen)
    segments = [f"{PREFIX}bloom:{i}" for i in range(shape.segments)]
    made = sum(int(client.memory_usage(key, samples=0) or 0) for key in segments)
    assert made / 200_000 <= 2.0
    drive = Driver(client, seen.script_arg(1))
    rng = random.Random(7)
    fps = fingerprints(rng, 200_000)
    for start in range(0, len(fps), 20_000):
        drive(fps[start : start + 20_000])
    assert all(all(drive(fps[i : i + 20_000])) for i in range(0, len(fps), 20_000))
    # made at full size when the crawl was created: filling it took no memory
    assert sum(int(client.memory_usage(key, samples=0) or 0) for key in segments) == made
    # Probing adds: each batch of probes runs on the filled filter, restored after it.
    filled = [bytes(client.dump(key) or b"") for key in segments]
    probes, batch = fingerprints(rng, 200_000), 2000
    wrong = 0
    for i in range(0, len(probes), batch):
        wrong += sum(drive(probes[i : i + batch]))
        for key, data in zip(segments, filled, strict=True):
            client.restore(key, 0, data, replace=True)
    # Probe j sees 200,000 + j % batch URLs: each of those fills len(probes) /
    # batch times (the rate's sum, once per fill: 2,000 evaluations, not 200,000).
    assert len(probes) % batch == 0
    expected = len(probes) // batch * sum(shape.expected_fp_rate(200_000 + r) for r in range(batch))
    assert 0.5 * expected <= wrong <= 1.5 * expected, (wrong, expected)
    assert shape.expected_fp_rate(200_000) <= 0.001  # sized for the configured rate
    # and the sample agrees with it: at most three standard deviations above
    assert wrong <= len(probes) * 0.001 + 3 * math.sqrt(len(probes) * 0.001)
    seg, pos = bloom_positions(np.frombuffer(fps[0], dtype=np.uint8).reshape(1, 8), shape)
    for p in pos[0].tolist():  # the model's positions are the script's
        assert client.getbit(f"{PREFIX}bloom:{int(seg[0])}", p) == 1


async def test_loaded_bloom_filter_is_the_one_the_script_fills(
    make_frontier: MakeFrontier, client: redis.Redis
) -> None:
    """testkit's Bloom loader sets the bits the script sets (the benchmark's
    100M-URL filters are loaded, not filled through Lua)."""
    seen = SeenFilter("bloom", 60_000)
    await make_frontier(crawl="t", shards=1, seen=seen)
    await make_frontier(crawl="u", shards=1, seen=seen)
    shape = seen.bloom(1)
    fps = fingerprints(random.Random(11), 30_000)
    drive = Driver(client, seen.script_arg(1))
    for start in range(0, len(fps), 10_000):
        assert sum(drive(fps[start : start + 10_000])) < 5  # a few false positives at most
    load_bloom(client, CrawlKeys("u", 1), 0, as_array(fps), shape)
    for i in range(shape.segments):
        assert client.get(CrawlKeys("u", 1).bloom_segment(0, i)) == client.get(f"{PREFIX}bloom:{i}")


# -- layout fixed per crawl, settings --------------------------------------------


async def test_a_crawl_with_fixed_seen_buckets_is_refused(
    make_frontier: MakeFrontier, client: redis.Redis
) -> None:
    """A crawl made by the version with CRAWL_SEEN_BUCKET_BITS: its seen:<n>
    strings would be misread as buckets of the growing table."""
    client.hset("cp:{old}:meta", mapping={
        "queue_layout": "bands1", "shards": "2", "seen_bucket_bits": "12",
        "priority_mode": "score", "created": "1",
    })  # fmt: skip
    client.set(CrawlKeys("old", 2, tags=PLAIN).seen_bucket(0, 7), bytes(60))  # an older crawl
    with pytest.raises(FrontierMismatch) as refused:
        await make_frontier(crawl="old")
    message = str(refused.value)
    assert "'old'" in message and "seen_bucket_bits=12" in message
    assert "older version" in message and "CRAWL_NAME" in message
    assert client.hget("cp:{old}:meta", "seen_layout") is None  # nothing written
    assert (await make_frontier(crawl="new")).seen.kind == "exact"
    assert client.hget("cp:{new}:meta", "seen_layout") == b"exact3"


async def test_a_crawl_with_the_packed_bucket_seen_set_is_refused(
    make_frontier: MakeFrontier, client: redis.Redis
) -> None:
    """A crawl made by the version whose exact buckets were packed strings in
    hashes (``exact2``): its ``seen:<g>`` hashes are not this version's sets."""
    await make_frontier(crawl="lh")
    client.hset("cp:{lh}:meta", "seen_layout", "exact2")
    with pytest.raises(FrontierMismatch) as refused:
        await make_frontier(crawl="lh")
    message = str(refused.value)
    assert "'lh'" in message and "'exact2'" in message
    assert "older version" in message and "CRAWL_NAME" in message


async def test_a_worker_with_another_seen_filter_is_refused(make_frontier: MakeFrontier) -> None:
    bloom = SeenFilter("bloom", 50_000)
    await make_frontier(crawl="b", seen=bloom)
    await make_frontier(crawl="b", seen=SeenFilter("bloom", 50_000))  # same settings: joins
    with pytest.raises(FrontierMismatch, match=r"CRAWL_SEEN_FILTER = 'bloom'.*'exact'"):
        await make_frontier(crawl="b")
    with pytest.raises(FrontierMismatch, match=r"CRAWL_SEEN_CAPACITY = 50000.*= 60000"):
        await make_frontier(crawl="b", seen=SeenFilter("bloom", 60_000))
    await make_frontier(crawl="e")
    with pytest.raises(FrontierMismatch, match=r"'exact'.*'bloom'"):
        await make_frontier(crawl="e", seen=bloom)


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"CRAWL_SEEN_BUCKET_BITS": 14}, "CRAWL_SEEN_BUCKET_BITS is retired"),
        ({"CRAWL_SEEN_FILTER": "bloom"}, "needs CRAWL_SEEN_CAPACITY"),
        ({"CRAWL_SEEN_FILTER": "bloom", "CRAWL_SEEN_CAPACITY": -5}, "needs CRAWL_SEEN_CAPACITY"),
        ({"CRAWL_SEEN_CAPACITY": 1000}, "CRAWL_SEEN_CAPACITY sizes a Bloom filter"),
        ({"CRAWL_SEEN_FILTER": "cuckoo"}, "CRAWL_SEEN_FILTER must be"),
        ({"CRAWL_SEEN_FILTER": "bloom", "CRAWL_SEEN_CAPACITY": 10, "CRAWL_SEEN_ERROR_RATE": 0},
         "CRAWL_SEEN_ERROR_RATE"),
    ],
)  # fmt: skip
def test_seen_settings_refused_at_start(settings: dict[str, object], refusal: str) -> None:
    with pytest.raises(ConfigError, match=refusal):
        FrontierConfig.from_settings(Settings(settings))


def test_seen_settings_read_once() -> None:
    config = FrontierConfig.from_settings(
        Settings({"CRAWL_SEEN_FILTER": "Bloom", "CRAWL_SEEN_CAPACITY": "2000000"})
    )
    assert config.seen == SeenFilter("bloom", 2_000_000, 0.001)
    assert FrontierConfig.from_settings(Settings()).seen == SeenFilter()


# -- figures: stats, status ------------------------------------------------------------


async def test_bloom_fill_is_a_stat_a_status_figure_and_one_warning(
    make_frontier: MakeFrontier, client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    from scrapy.utils.test import get_crawler

    seen = SeenFilter("bloom", 1000, 0.01)
    f = await make_frontier(crawl="t", shards=2, seen=seen)
    stats = get_crawler().stats
    assert stats is not None
    watch = SeenWatch(stats)
    entries = [
        NewEntry(f"h{i % 7}.test", random.Random(i).randbytes(8), False, b'{"url":"u"}')
        for i in range(800)
    ]
    added = (await f.add(entries)).added  # 800 distinct: a Bloom filter may call a few seen
    assert added >= 790
    await watch.check(f.redis, f.keys)
    figures = await seen_figures(f.redis, f.keys)
    assert figures.urls == added
    assert stats.get_value("frontier/seen_urls") == figures.urls
    assert stats.get_value("frontier/seen_capacity_used") == pytest.approx(figures.urls / 1000)
    rate = stats.get_value("frontier/seen_fp_rate_expected")
    assert 0 < rate < 0.01
    status = await collect_status(f.redis, f.keys, 1000)
    assert status["frontier"]["seen"] == figures.as_dict()
    assert "Bloom" not in caplog.text
    await f.add([NewEntry("x.test", random.Random(-i).randbytes(8), False, b"{}")
                 for i in range(1, 600)])  # fmt: skip
    watch._next = 0.0  # as if WATCH_SECONDS had passed
    with caplog.at_level(logging.WARNING):
        await watch.check(f.redis, f.keys)
        watch._next = 0.0
        await watch.check(f.redis, f.keys)
    assert caplog.text.count("past its CRAWL_SEEN_CAPACITY") == 1
    assert stats.get_value("frontier/seen_capacity_used") > 1
    exact = await make_frontier(crawl="x")
    await exact.add(entries[:10])
    assert (await seen_figures(exact.redis, exact.keys)).as_dict() == {
        "filter": "exact", "urls": 10,
    }  # fmt: skip


def test_a_bloom_crawl_of_the_test_web_completes(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """Two workers, CRAWL_SEEN_FILTER = bloom: every page fetched once, the
    fill reported as stats and in the crawl's status."""
    web = testweb_factory(hosts=8, pages=10, latency_ms=(2, 10), links=4, cross_links=1)
    settings = {
        "CRAWL_HOST_DELAY": 0.1, "CRAWL_IDLE_CLOSE_SECONDS": 2, "CRAWL_IDLE_POLL_SECONDS": 0.2,
        "LOG_LEVEL": "INFO", "CRAWL_SEEN_FILTER": "bloom", "CRAWL_SEEN_CAPACITY": 20_000,
    }  # fmt: skip
    procs = [
        start_worker(REPO_ROOT, redis_url, "bl", web.seeds, settings, tmp_path / f"w{i}.log")
        for i in range(2)
    ]
    wait_all(procs, timeout=120)
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls
    assert all(n == 1 for n in fetched.values()), {u: n for u, n in fetched.items() if n > 1}
    for p in procs:
        assert stats_of(p.log_path).get("frontier/seen_urls", 0) > 0
        assert "'frontier/seen_capacity_used'" in p.log_path.read_text()

    async def figures() -> dict[str, object]:
        r = redis.asyncio.Redis.from_url(redis_url)
        try:
            return (await seen_figures(r, CrawlKeys("bl", NEW_CRAWL_SHARDS))).as_dict()
        finally:
            await r.aclose()

    got = asyncio.run(figures())
    assert got["filter"] == "bloom" and got["capacity"] == 20_000
    assert int(str(got["urls"])) >= len(web.expected_urls)
