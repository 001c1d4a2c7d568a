"""The duplicate index (dedupe.lua) against a real redis-server."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import random
from collections.abc import AsyncIterator, Callable, Iterable

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from crawlproject.dedupe.fingerprint import FEATURES_VERSION
from crawlproject.dedupe.index import (
    DedupeBatcher,
    DedupeIndex,
    DedupeKind,
    DedupeMismatch,
    DedupeVerdict,
    block_layout,
)
from crawlproject.frontier.keys import CrawlKeys

MakeIndex = Callable[..., DedupeIndex]
BASE = 0x9E3779B97F4A7C15  # an arbitrary 64-bit SimHash


@pytest.fixture
async def make_index(redis_url: str) -> AsyncIterator[MakeIndex]:
    clients: list[Redis] = []

    def make(
        crawl: str = "t", k: int = 3, record_originals: bool = True, features_version: int = 2
    ) -> DedupeIndex:
        redis = Redis.from_url(redis_url)
        clients.append(redis)
        return DedupeIndex(
            redis,
            CrawlKeys(crawl, 2),
            k=k,
            record_originals=record_originals,
            features_version=features_version,
        )

    yield make
    for c in clients:
        await c.aclose()


def sha1(text: str) -> bytes:
    return hashlib.sha1(text.encode()).digest()


def flip(simhash: int, *bits: int) -> int:
    """Flips bits counted from the most significant (0) to the least (63)."""
    for b in bits:
        simhash ^= 1 << (63 - b)
    return simhash


async def keys_of(index: DedupeIndex, kind: str) -> list[bytes]:
    return sorted(await index.redis.keys(index.keys.dedupe_prefix + kind + ":*"))


async def test_new_then_exact_for_the_same_body(make_index: MakeIndex) -> None:
    index = make_index()
    first = await index.check_and_add(sha1("body"), BASE, "http://a.test/1", "http://a.test")
    assert first == DedupeVerdict(DedupeKind.NEW, None, None, 0)
    again = await index.check_and_add(sha1("body"), BASE, "http://a.test/2", "http://a.test")
    assert again == DedupeVerdict(DedupeKind.EXACT, "http://a.test/1", 0, 1)
    counters = await index.redis.hgetall(index.keys.dedupe_counters)
    assert counters == {b"new": b"1", b"exact": b"1"}


@pytest.mark.parametrize(
    "bits",
    [
        (5,),  # distance 1
        (3, 40),  # 2, two blocks
        (17, 18),  # 2, one block
        (0, 21, 63),  # 3, three blocks
        (48, 50, 55),  # 3, one block
        (1, 2, 60),  # 3, two blocks
    ],
)
async def test_near_within_k_names_the_original(make_index: MakeIndex, bits: tuple[int]) -> None:
    index = make_index()
    await index.check_and_add(sha1("other"), BASE ^ (1 << 64) - 1, "http://b.test/", "h")
    await index.check_and_add(sha1("page"), BASE, "http://a.test/p", "h")
    got = await index.check_and_add(sha1("copy"), flip(BASE, *bits), "http://a.test/q", "h")
    assert got == DedupeVerdict(DedupeKind.NEAR, "http://a.test/p", len(bits), 1)


async def test_near_picks_the_smallest_distance(make_index: MakeIndex) -> None:
    index = make_index()
    await index.check_and_add(sha1("far"), flip(BASE, 0, 20, 40), "http://a.test/far", "h")
    await index.check_and_add(sha1("close"), flip(BASE, 63), "http://a.test/close", "h")
    got = await index.check_and_add(sha1("q"), BASE, "http://a.test/q", "h")
    assert (got.kind, got.original, got.distance) == (DedupeKind.NEAR, "http://a.test/close", 1)


async def test_distance_4_is_new_with_k3_and_near_with_k5(make_index: MakeIndex) -> None:
    far = flip(BASE, 0, 20, 40, 60)  # one bit in each of the four 16-bit blocks
    k3 = make_index("k3", k=3)
    await k3.check_and_add(sha1("a"), BASE, "http://a.test/a", "h")
    assert (await k3.check_and_add(sha1("b"), far, "http://a.test/b", "h")).kind is DedupeKind.NEW
    k5 = make_index("k5", k=5)
    await k5.check_and_add(sha1("a"), BASE, "http://a.test/a", "h")
    got = await k5.check_and_add(sha1("b"), far, "http://a.test/b", "h")
    assert (got.kind, got.distance, got.original) == (DedupeKind.NEAR, 4, "http://a.test/a")
    six = flip(BASE, 0, 11, 22, 33, 44, 55)
    assert (await k5.check_and_add(sha1("c"), six, "u", "h")).kind is DedupeKind.NEW


async def test_a_worker_with_another_k_is_refused(make_index: MakeIndex) -> None:
    await make_index(k=3).check_and_add(sha1("a"), BASE, "u", "h")
    with pytest.raises(DedupeMismatch, match="k=3"):
        await make_index(k=4).check_and_add(sha1("b"), BASE, "u", "h")
    with pytest.raises(DedupeMismatch, match="k=3, this worker has k=4"):
        await make_index(k=4).verify()


def test_the_default_features_version_is_the_fingerprints() -> None:
    assert FEATURES_VERSION == 2  # bump it with the features; the tests here follow
    index = DedupeIndex(Redis(), CrawlKeys("t", 2))
    assert index.features_version == FEATURES_VERSION
    with pytest.raises(ValueError, match="features_version"):
        DedupeIndex(Redis(), CrawlKeys("t", 2), features_version=0)


async def test_the_first_page_records_k_and_the_features_version(make_index: MakeIndex) -> None:
    index = make_index(k=3)
    await index.verify()  # no index yet: passes, writes nothing
    assert await index.redis.exists(index.keys.dedupe_config) == 0
    await index.check_and_add(sha1("a"), None, "u", "h")  # exact-only pages record it too
    cfg = await index.redis.hgetall(index.keys.dedupe_config)
    assert cfg == {b"k": b"3", b"fv": str(FEATURES_VERSION).encode()}
    await index.verify()
    again = await make_index(k=3).check_and_add(sha1("a"), BASE, "v", "h")
    assert again.kind is DedupeKind.EXACT


@pytest.mark.parametrize("simhash", [BASE, None])
async def test_a_worker_with_other_features_is_refused(
    make_index: MakeIndex, simhash: int | None
) -> None:
    old = make_index("old", features_version=1)
    await old.check_and_add(sha1("a"), BASE, "http://a.test/a", "h")
    new = make_index("old", features_version=2)
    expected = "created with SimHash features version 1, this worker has version 2"
    with pytest.raises(DedupeMismatch, match=expected) as refused:
        await new.check_and_add(sha1("b"), simhash, "http://a.test/b", "h")
    assert "\n" not in str(refused.value)  # one line
    with pytest.raises(DedupeMismatch, match=expected):
        await new.verify()
    with pytest.raises(DedupeMismatch, match=expected):  # batched too
        await new.check_and_add_many([(sha1("c"), BASE, "http://a.test/c", "h")] * 2)
    # Nothing of the refused pages was stored; the old worker carries on.
    counters = await old.redis.hgetall(old.keys.dedupe_counters)
    assert counters == {b"new": b"1"}
    got = await old.check_and_add(sha1("b"), flip(BASE, 7), "http://a.test/b", "h")
    assert (got.kind, got.original) == (DedupeKind.NEAR, "http://a.test/a")


async def test_an_index_from_before_the_features_version_is_version_1(
    make_index: MakeIndex,
) -> None:
    """An index the previous release created holds ``k`` only: its SimHashes are
    of version 1, so a version-2 worker is refused and a version-1 one is not."""
    index = make_index("before")
    await index.redis.hset(index.keys.dedupe_config, "k", "3")
    with pytest.raises(DedupeMismatch, match="features version 1, this worker has version 2"):
        await index.check_and_add(sha1("a"), BASE, "u", "h")
    with pytest.raises(DedupeMismatch, match="features version 1"):
        await index.verify()
    v1 = make_index("before", features_version=1)
    await v1.verify()
    assert (await v1.check_and_add(sha1("a"), BASE, "u", "h")).kind is DedupeKind.NEW
    cfg = await index.redis.hgetall(index.keys.dedupe_config)
    assert cfg == {b"k": b"3"}  # not rewritten


@pytest.mark.parametrize("k", [0, 1, 3, 5])
async def test_verdicts_match_a_brute_force_reference(make_index: MakeIndex, k: int) -> None:
    """Random pages and copies of them with 0..k+2 flipped bits, in batches."""
    index = make_index(k=k)
    rng = random.Random(k)
    stored: list[tuple[int, str]] = []
    expected: list[tuple[DedupeKind, int | None, str | None]] = []
    pages: list[tuple[bytes, int | None, str, str]] = []
    for n in range(600):
        if stored and rng.random() < 0.6:
            base = rng.choice(stored)[0]
            simhash = flip(base, *rng.sample(range(64), rng.randint(0, k + 2)))
        else:
            simhash = rng.getrandbits(64)
        url = f"http://a.test/{n}"
        best = min(((bin(s ^ simhash).count("1"), u) for s, u in stored), default=None)
        if best is not None and best[0] <= k:
            expected.append((DedupeKind.NEAR, best[0], best[1]))
        else:
            expected.append((DedupeKind.NEW, None, None))
            stored.append((simhash, url))
        pages.append((sha1(url), simhash, url, "h"))
    got: list[DedupeVerdict] = []
    for start in range(0, len(pages), 100):
        got += await index.check_and_add_many(pages[start : start + 100])
    assert [(v.kind, v.distance) for v in got] == [(e[0], e[1]) for e in expected]
    # Of equally near originals either may be named; it must be that near.
    by_url = {u: s for s, u in stored}
    for v, (_, simhash, _, _) in zip(got, pages, strict=True):
        if v.kind is DedupeKind.NEAR:
            assert v.original is not None
            assert bin(by_url[v.original] ^ simhash).count("1") == v.distance
    assert sum(v.kind is DedupeKind.NEAR for v in got) > 100


async def test_random_fingerprints_are_new(make_index: MakeIndex) -> None:
    index = make_index()
    rng = random.Random(1)
    pages = [
        (rng.randbytes(20), rng.getrandbits(64), f"http://a.test/{n}", "h") for n in range(3000)
    ]
    verdicts = await index.check_and_add_many(pages)
    assert all(v.kind is DedupeKind.NEW for v in verdicts)
    assert (await index.redis.hgetall(index.keys.dedupe_counters)) == {b"new": b"3000"}
    # Every key is under the crawl's dedupe prefix: one Redis Cluster slot.
    names = await index.redis.keys("*")
    assert len(names) > 3000
    assert all(name.startswith(index.keys.dedupe_prefix.encode()) for name in names)
    assert {key_slot(name) for name in names} == {key_slot(index.keys.dedupe_config.encode())}


async def test_a_match_straddling_two_entries_does_not_count(make_index: MakeIndex) -> None:
    index = make_index()
    # Exact: two digests in one bucket; a third whose 8 stored bytes are the
    # tail of the first entry and the head of the second.
    d1 = bytes.fromhex("abcd" + "1111111122222222") + bytes(10)
    d2 = bytes.fromhex("abcd" + "3333333344444444") + bytes(10)
    straddle = bytes.fromhex("abcd" + "2222222233333333") + bytes(10)
    for n, d in enumerate((d1, d2)):
        assert (await index.check_and_add(d, None, f"u{n}", "h")).kind is DedupeKind.NEW
    assert await index.redis.get(index.keys.dedupe_exact(0xABCD)) == d1[2:10] + d2[2:10]
    assert (await index.check_and_add(straddle, None, "u2", "h")).kind is DedupeKind.NEW
    assert (await index.check_and_add(d2, None, "u3", "h")).kind is DedupeKind.EXACT
    # Near: S1 and S2 share block 0 (v); Q = S1's tail + S2's head shares block 0
    # and block 2 with S1 but is far from both.
    s1, s2, q = 0xF00D_0000_F00D_FFFF, 0xF00D_0000_1234_5678, 0xF00D_FFFF_F00D_0000
    for n, s in enumerate((s1, s2)):
        assert (await index.check_and_add(sha1(f"s{n}"), s, f"s{n}", "h")).kind is DedupeKind.NEW
    joined = s1.to_bytes(8, "big") + s2.to_bytes(8, "big")
    assert joined[4:12] == q.to_bytes(8, "big")
    assert await index.redis.get(index.keys.dedupe_near(0, 0xF00D)) == joined
    assert (await index.check_and_add(sha1("q"), q, "q", "h")).kind is DedupeKind.NEW


async def test_without_simhash_only_the_exact_test_runs(make_index: MakeIndex) -> None:
    index = make_index()
    assert (await index.check_and_add(sha1("pdf"), None, "http://a.test/a.pdf", "h")).kind == "new"
    assert await keys_of(index, "s") == []  # nothing in the near index
    again = await index.check_and_add(sha1("pdf"), None, "http://a.test/b.pdf", "h")
    assert (again.kind, again.original) == (DedupeKind.EXACT, "http://a.test/a.pdf")
    # An HTML page near nothing stored is new; a non-HTML copy of it is exact.
    await index.check_and_add(sha1("html"), BASE, "http://a.test/page", "h")
    other = await index.check_and_add(sha1("other"), None, "http://a.test/x", "h")
    assert other.kind is DedupeKind.NEW
    same = await index.check_and_add(sha1("html"), None, "http://a.test/raw", "h")
    assert same.kind is DedupeKind.EXACT  # its original was recorded under the SimHash
    # The same bytes stored without a SimHash, now seen with one: found by digest.
    later = await index.check_and_add(sha1("pdf"), BASE ^ 0xFFFF_FFFF, "http://a.test/c", "h")
    assert (later.kind, later.original) == (DedupeKind.EXACT, "http://a.test/a.pdf")


async def test_without_originals_nothing_is_recorded(make_index: MakeIndex) -> None:
    index = make_index(record_originals=False)
    await index.check_and_add(sha1("a"), BASE, "http://a.test/1", "h")
    exact = await index.check_and_add(sha1("a"), BASE, "http://a.test/2", "h")
    near = await index.check_and_add(sha1("b"), flip(BASE, 9), "http://a.test/3", "h")
    assert exact == DedupeVerdict(DedupeKind.EXACT, None, 0, 1)
    assert near == DedupeVerdict(DedupeKind.NEAR, None, 1, 2)
    assert await keys_of(index, "o") == []


async def test_the_streak_counts_duplicates_per_host_and_a_new_page_ends_it(
    make_index: MakeIndex,
) -> None:
    index = make_index()
    a, b = "http://a.test", "http://b.test"

    async def check(body: str, simhash: int | None, host: str) -> int:
        return (await index.check_and_add(sha1(body), simhash, f"{host}/{body}", host)).host_streak

    assert await check("p1", BASE, a) == 0
    assert await check("p1", BASE, a) == 1  # exact
    assert await check("p2", flip(BASE, 1), a) == 2  # near
    assert await check("p3", flip(BASE, 2, 3), b) == 1  # another host's own streak
    assert await check("p1", None, a) == 3
    assert await index.redis.hgetall(index.keys.dedupe_streak) == {
        a.encode(): b"3",
        b.encode(): b"1",
    }
    assert await check("fresh", ~BASE & (1 << 64) - 1, a) == 0
    assert await index.redis.hgetall(index.keys.dedupe_streak) == {b.encode(): b"1"}
    assert await check("p1", BASE, a) == 1


async def test_of_concurrent_copies_exactly_one_is_new(make_index: MakeIndex) -> None:
    indexes = [make_index() for _ in range(4)]
    rng = random.Random(7)
    calls = []
    for n in range(20):
        # Copies 0-1 bits from BASE: pairwise at most 2 apart; some with one body
        # (and so one SimHash).
        body = "same" if n % 5 == 0 else f"copy{n}"
        simhash = BASE if n % 5 == 0 or n % 3 == 0 else flip(BASE, rng.randrange(64))
        calls.append(indexes[n % 4].check_and_add(sha1(body), simhash, f"http://a.test/{n}", "h"))
    verdicts = await asyncio.gather(*calls)
    assert sum(v.kind is DedupeKind.NEW for v in verdicts) == 1
    new_url = f"http://a.test/{next(n for n, v in enumerate(verdicts) if v.kind == 'new')}"
    assert all(v.original == new_url for v in verdicts if v.kind != "new")
    assert sorted(v.host_streak for v in verdicts) == list(range(20))
    assert await indexes[0].redis.hget(indexes[0].keys.dedupe_counters, "new") == b"1"


async def test_a_script_flush_in_between_still_works(make_index: MakeIndex) -> None:
    index = make_index()
    assert (await index.check_and_add(sha1("a"), BASE, "u1", "h")).kind is DedupeKind.NEW
    await index.redis.script_flush()
    assert (await index.check_and_add(sha1("a"), BASE, "u2", "h")).kind is DedupeKind.EXACT
    await index.redis.script_flush()
    many = await index.check_and_add_many(
        [(sha1("b"), flip(BASE, 7), "u3", "h"), (sha1("c"), ~BASE & (1 << 64) - 1, "u4", "h")]
    )
    assert [v.kind for v in many] == [DedupeKind.NEAR, DedupeKind.NEW]


def test_block_layout_covers_the_64_bits() -> None:
    assert [(b.shift, b.bits) for b in block_layout(3)] == [(48, 16), (32, 16), (16, 16), (0, 16)]
    assert [b.bits for b in block_layout(5)] == [11, 11, 11, 11, 10, 10]
    for k in range(16):
        blocks = block_layout(k)
        assert len(blocks) == k + 1 and sum(b.bits for b in blocks) == 64
        assert all(a.shift == b.shift + b.bits for a, b in itertools.pairwise(blocks))
        assert blocks[-1].shift == 0


async def test_bad_arguments_are_refused(make_index: MakeIndex) -> None:
    with pytest.raises(ValueError, match="k must be"):
        make_index(k=16)
    index = make_index()
    with pytest.raises(ValueError, match="20-byte"):
        await index.check_and_add(b"short", BASE, "u", "h")
    with pytest.raises(ValueError, match="64-bit"):
        await index.check_and_add(sha1("a"), 1 << 64, "u", "h")


class CountingIndex(DedupeIndex):
    """Counts the round trips (check_and_add_many calls) a batcher makes."""

    batches: list[int]

    async def check_and_add_many(
        self, pages: Iterable[tuple[bytes, int | None, str, str]]
    ) -> list[DedupeVerdict]:
        pages = list(pages)
        self.batches.append(len(pages))
        return await super().check_and_add_many(pages)


async def test_the_batcher_sends_pages_judged_together_in_one_round_trip(
    redis_url: str,
) -> None:
    redis = Redis.from_url(redis_url)
    index = CountingIndex(redis, CrawlKeys("b", 2), k=3)
    index.batches = []
    batcher = DedupeBatcher(index, window_seconds=0.05, max_pages=8)
    pages = [
        (sha1(f"p{i}"), flip(BASE, i), f"http://a.test/{i}", "http://a.test") for i in range(10)
    ]
    # 10 near copies at once: the first is new, the rest near it, in call order.
    verdicts = await asyncio.gather(*(batcher.check_and_add(*p) for p in pages))
    assert [v.kind for v in verdicts] == [DedupeKind.NEW] + [DedupeKind.NEAR] * 9
    assert verdicts[5].original == "http://a.test/0"
    assert index.batches == [8, 2]  # a full batch at once, the rest after the window
    await redis.aclose()
    # An error reaches every caller of the batch (the middleware then keeps the pages).
    gone = Redis.from_url("redis://127.0.0.1:9/0")  # nothing listens there
    dead = DedupeBatcher(DedupeIndex(gone, CrawlKeys("b", 2), k=3), window_seconds=0.01)
    results = await asyncio.gather(
        *(dead.check_and_add(*p) for p in pages[:2]), return_exceptions=True
    )
    assert all(isinstance(r, RedisConnectionError) for r in results), results
    await gone.aclose()
