"""The duplicate index's verdicts against a real redis-server: a crawl's
index as a worker sees it (spread, the one layout since issue 42; what is
particular to the spread parts and the cluster: tests/test_dedupe_spread.py;
a one-tag index made before: tests/test_dedupe_migrate.py)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import random
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from urllib.parse import urlsplit

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from scrapy.settings import Settings

from crawlproject.dedupe.batcher import DedupeBatcher
from crawlproject.dedupe.config import DedupeConfig
from crawlproject.dedupe.fingerprint import FEATURES_VERSION
from crawlproject.dedupe.index import (
    FIXED_BUCKETS,
    DedupeIndex,
    DedupeKind,
    DedupeMismatch,
    DedupeVerdict,
    index_figures,
)
from crawlproject.dedupe.layout import layout_problem, near_tables, near_width, split_blocks
from crawlproject.dedupe.spread import EXACT, bucket_key
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.setting_values import ConfigError
from crawlproject.status.view import index_layout

MakeIndex = Callable[..., DedupeIndex]
BASE = 0x9E3779B97F4A7C15  # an arbitrary 64-bit SimHash


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
    """Flips bits counted from the most significant (0) to the least (63)."""
    for b in bits:
        simhash ^= 1 << (63 - b)
    return simhash


async def keys_of(index: DedupeIndex, kind: str) -> list[bytes]:
    """The index's keys of one kind (``s``, ``x``, ``o``) in every part."""
    return sorted(await index.redis.keys(f"cp:{{{index.keys.crawl}/dd/*}}:{kind}:*"))


async def test_new_then_exact_for_the_same_body(make_index: MakeIndex) -> None:
    index = make_index()
    first = await index.check_and_add(sha1("body"), BASE, "http://a.test/1", "http://a.test")
    assert first == DedupeVerdict(DedupeKind.NEW, None, None, 0)
    again = await index.check_and_add(sha1("body"), BASE, "http://a.test/2", "http://a.test")
    assert again == DedupeVerdict(DedupeKind.EXACT, "http://a.test/1", 0, 1)
    figures = await index_figures(index.redis, index.keys)
    assert (figures["pages"], figures["exact"], figures["near"]) == (1, 1, 0)


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
    assert cfg == {
        b"k": b"3",
        b"fv": str(FEATURES_VERSION).encode(),
        # The layout: 5 blocks (10 tables), its load and first level, its parts
        # (each part keeps its own growth: its ``st``).
        b"b": b"5",
        b"load": b"32",
        b"nmin": b"10",
        b"parts": b"16",
    }
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
    figures = await index_figures(old.redis, old.keys)
    assert (figures["pages"], figures["exact"], figures["near"]) == (1, 0, 0)
    got = await old.check_and_add(sha1("b"), flip(BASE, 7), "http://a.test/b", "h")
    assert (got.kind, got.original) == (DedupeKind.NEAR, "http://a.test/a")


async def test_an_index_from_before_the_features_version_is_version_1(
    make_index: MakeIndex,
) -> None:
    """An index the previous release created holds ``k`` only: its SimHashes are
    of version 1, so a version-2 worker is refused; a version-1 one is refused
    too, for its fixed buckets (no ``b``: from before the growing layout)."""
    index = make_index("before")
    await index.redis.hset(index.keys.dedupe_config, "k", "3")
    with pytest.raises(DedupeMismatch, match="features version 1, this worker has version 2"):
        await index.check_and_add(sha1("a"), BASE, "u", "h")
    with pytest.raises(DedupeMismatch, match="features version 1"):
        await index.verify()
    v1 = make_index("before", features_version=1)
    with pytest.raises(DedupeMismatch, match="created with fixed buckets"):
        await v1.verify()
    with pytest.raises(DedupeMismatch, match="created with fixed buckets"):
        await v1.check_and_add(sha1("a"), BASE, "u", "h")
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


async def test_a_match_straddling_two_entries_does_not_count(make_index: MakeIndex) -> None:
    index = make_index()
    # Exact: two digests in one bucket (of exact part 10, SHA-1 byte 1's top 4
    # bits, at its first level 12: bytes 1-2's low 12 bits); a third whose 8
    # stored bytes are the tail of the first entry and the head of the second.
    d1 = bytes.fromhex("abcd" + "1111111122222222") + bytes(10)
    d2 = bytes.fromhex("abcd" + "3333333344444444") + bytes(10)
    straddle = bytes.fromhex("abcd" + "2222222233333333") + bytes(10)
    for n, d in enumerate((d1, d2)):
        assert (await index.check_and_add(d, None, f"u{n}", "h")).kind is DedupeKind.NEW
    assert index.spread is not None
    sp = index.spread.spread
    exact_bucket = bucket_key(sp.prefix(EXACT, 10), None, 0xBCD)
    assert await index.redis.get(exact_bucket) == d1[2:10] + d2[2:10]
    assert (await index.check_and_add(straddle, None, "u2", "h")).kind is DedupeKind.NEW
    assert (await index.check_and_add(d2, None, "u3", "h")).kind is DedupeKind.EXACT
    # Near: S1 and S2 in one bucket of table 0 (part 0: the key's top 4 bits;
    # its first level 6: bits 38-43); Q = S1's tail + S2's head is in that
    # bucket too, passes table 0's filter (byte 1) like them, and is far from
    # both.
    s1, s2, q = 0x019960C3017760D6, 0x019960E7145DBB2B, 0x017760D6019960E7
    table = index.tables[0]
    assert {table.key(s) % 1024 for s in (s1, s2, q)} == {387} and table.filter == "1ff"
    assert {s >> 56 for s in (s1, s2, q)} == {0x01}
    for n, s in enumerate((s1, s2)):
        assert (await index.check_and_add(sha1(f"s{n}"), s, f"s{n}", "h")).kind is DedupeKind.NEW
    joined = s1.to_bytes(8, "big") + s2.to_bytes(8, "big")
    assert joined[4:12] == q.to_bytes(8, "big")
    near_bucket = bucket_key(sp.prefix(sp.near_family(0), 0), 0, 387 % 64)
    assert await index.redis.get(near_bucket) == joined
    assert (await index.check_and_add(sha1("q"), q, "q", "h")).kind is DedupeKind.NEW


async def test_without_simhash_only_the_exact_test_runs(make_index: MakeIndex) -> None:
    index = make_index()
    assert (await index.check_and_add(sha1("pdf"), None, "http://a.test/a.pdf", "h")).kind == "new"
    assert await keys_of(index, "s") == []  # nothing in the near index
    again = await index.check_and_add(sha1("pdf"), None, "http://a.test/b.pdf", "h")
    assert (again.kind, again.original) == (DedupeKind.EXACT, "http://a.test/a.pdf")
    # An HTML page near nothing stored is new; a non-HTML copy of it finds no
    # URL recorded under its digest (the original's is under its SimHash), as
    # when its judge died before recording one: kept as new (its own URL then
    # recorded under the digest), never a copy of an unnamed page.
    await index.check_and_add(sha1("html"), BASE, "http://a.test/page", "h")
    other = await index.check_and_add(sha1("other"), None, "http://a.test/x", "h")
    assert other.kind is DedupeKind.NEW
    same = await index.check_and_add(sha1("html"), None, "http://a.test/raw", "h")
    assert (same.kind, same.unrecorded) == (DedupeKind.NEW, True)
    again = await index.check_and_add(sha1("html"), None, "http://a.test/raw2", "h")
    assert (again.kind, again.original) == (DedupeKind.EXACT, "http://a.test/raw")
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


async def index_state(index: DedupeIndex) -> dict[bytes, object]:
    """Every key of the crawl's duplicate index (either layout) and its value:
    entries, originals, counters, streaks. Not the state of a spread part that
    holds no page (its first check records the index's layout there)."""
    state: dict[bytes, object] = {}
    async for key in index.redis.scan_iter(match=f"cp:{{{index.keys.crawl}/dd*"):
        kind = await index.redis.type(key)
        if kind == b"hash":
            value = await index.redis.hgetall(key)
            if not (key.endswith(b"}:st") and value.get(b"n", b"0") == b"0"):
                state[key] = value
        else:
            assert kind == b"string", (key, kind)
            state[key] = await index.redis.get(key)
    return state


async def test_a_page_checked_again_under_its_own_url_is_no_duplicate(
    make_index: MakeIndex,
) -> None:
    """A page checked again under its own URL (a recrawl of an unchanged page,
    a lease that brought back a URL whose worker died after judging it) finds
    its own entry: answered same-URL, it counts nothing, stores nothing and
    leaves its host's streak as it was (neither raised nor ended); a real copy
    after it gets streak 1, not 1 + the rechecks."""
    index = make_index()
    host = "http://a.test"
    page = f"{host}/page"
    assert (await index.check_and_add(sha1("body"), BASE, page, host)).kind is DedupeKind.NEW
    pdf = f"{host}/a.pdf"  # no SimHash: exact only
    assert (await index.check_and_add(sha1("pdf"), None, pdf, host)).kind is DedupeKind.NEW
    before = await index_state(index)
    rechecks = [
        await index.check_and_add(sha1("pdf"), None, pdf, host),
        await index.check_and_add(sha1("body"), BASE, page, host),  # unchanged
        await index.check_and_add(sha1("body 2"), flip(BASE, 5), page, host),  # edited: near
    ]
    assert await index_state(index) == before  # no counter, no streak, no entry
    same = DedupeVerdict(DedupeKind.NEW, page, None, 0, same_url=True)
    assert rechecks == [DedupeVerdict(DedupeKind.NEW, pdf, None, 0, same_url=True), same, same]
    alias = await index.check_and_add(sha1("body"), BASE, f"{host}/index.html", host)
    assert (alias.kind, alias.original, alias.host_streak) == (DedupeKind.EXACT, page, 1)
    # With a streak running, a recheck neither raises nor ends it.
    assert await index.check_and_add(sha1("body"), BASE, page, host) == same
    near = await index.check_and_add(sha1("body 3"), flip(BASE, 9), f"{host}/?a=1", host)
    assert (near.kind, near.original, near.host_streak) == (DedupeKind.NEAR, page, 2)
    figures = await index_figures(index.redis, index.keys)
    assert [figures[kind] for kind in ("pages", "exact", "near")] == [2, 1, 1]


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


def test_split_blocks_covers_the_64_bits() -> None:
    assert [(b.shift, b.bits) for b in split_blocks(4)] == [(48, 16), (32, 16), (16, 16), (0, 16)]
    assert [b.bits for b in split_blocks(6)] == [11, 11, 11, 11, 10, 10]
    for k in range(16):
        blocks = split_blocks(k + 1)
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
    # 8 near copies at once: the first is new, the rest near it, in call order;
    # then 2 more, near it too. (Sent while the first batch is stored, they
    # could both be kept: of near copies judged at one moment the spread index
    # keeps at least one, not exactly one.)
    verdicts = await asyncio.gather(*(batcher.check_and_add(*p) for p in pages[:8]))
    verdicts += await asyncio.gather(*(batcher.check_and_add(*p) for p in pages[8:]))
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


async def test_a_digest_differing_in_bytes_1_2_only_is_no_copy(make_index: MakeIndex) -> None:
    """SHA-1 bytes 1-2 are held by the part and the bucket, not by the entry
    (bytes 3-10): a digest that differs from a stored one there only is new."""
    index = make_index(load=1)
    rng = random.Random(16)
    digests = [rng.randbytes(20) for _ in range(3000)]
    verdicts = await index.check_and_add_many([(d, None, "u", "h") for d in digests])
    assert {v.kind for v in verdicts} == {DedupeKind.NEW}
    again = await index.check_and_add_many([(d, None, "v", "h") for d in digests[:500]])
    assert {v.kind for v in again} == {DedupeKind.EXACT}
    for change in (0x80, 0x08):  # another part; the same part, another bucket
        other = [bytes([d[0] ^ change, d[1]]) + d[2:] for d in digests[:500]]
        verdicts = await index.check_and_add_many([(d, None, "w", "h") for d in other])
        assert {v.kind for v in verdicts} == {DedupeKind.NEW}


async def test_an_index_from_before_the_growing_layout_is_refused_in_one_line(
    make_index: MakeIndex,
) -> None:
    """Its cfg has no ``b`` (fixed buckets, a release before 2026-11-27): a
    worker that verifies is refused before its first page, one that did not is
    refused by the script; the same line says how, and nothing is written."""
    index = make_index("old")
    digest, simhash = sha1("old"), BASE
    # A fixed-bucket index's exact bucket (written as that release wrote it).
    bucket = f"{index.keys.dedupe_prefix}x:{digest[0] * 256 + digest[1]:04x}"
    await index.redis.append(bucket, digest[2:10])
    await index.redis.hset(index.keys.dedupe_config, mapping={"k": 3, "fv": 2})
    before = {key: await index.redis.dump(key) for key in await index.redis.keys("*")}
    line = FIXED_BUCKETS.format(crawl="old")
    assert "\n" not in line and "crawlproject reset --crawl old" in line
    with pytest.raises(DedupeMismatch) as refused:
        await make_index("old").verify()
    assert str(refused.value) == line
    with pytest.raises(DedupeMismatch) as refused:
        await index.check_and_add_many([(digest, simhash, "u", "h"), (sha1("n"), None, "n", "h")])
    assert str(refused.value) == line  # its opening reads the cfg (this one verified nothing)
    assert {key: await index.redis.dump(key) for key in await index.redis.keys("*")} == before


def send_resp(redis_url: str, data: bytes) -> None:
    """Raw RESP commands on one connection, replies off (as the benchmark loads)."""
    url = urlsplit(redis_url)
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 6379)) as sock:
        sock.sendall(b"CLIENT REPLY OFF\r\n" + data + b"CLIENT REPLY ON\r\n")
        assert sock.recv(64) == b"+OK\r\n"


def test_near_layouts_and_their_limits() -> None:
    """Every table of a layout keys b - k blocks; a page within k bits shares
    some table's whole key (pigeonhole); the narrowest key is near_width's."""
    assert [len(near_tables(k, k + 2)) for k in range(6)] == [1, 3, 6, 10, 15, 21]
    assert [sum(b.bits for b in t.blocks) for t in near_tables(3, 5)][:4] == [26, 26, 26, 25]
    rng = random.Random(9)
    for k, blocks in [(0, 2), (1, 3), (3, 4), (3, 5), (3, 6), (5, 7), (15, 16)]:
        tables = near_tables(k, blocks)
        assert near_width(k, blocks) == min(sum(b.bits for b in t.blocks) for t in tables)
        for _ in range(200):
            a = rng.getrandbits(64)
            b = flip(a, *rng.sample(range(64), k))
            assert any(t.key(a) == t.key(b) for t in tables), (k, blocks)
    # A table's filter byte holds only its key's bits: two SimHashes of one key agree there.
    assert [t.filter for t in near_tables(3, 4)] == ["1ff", "3ff", "5ff", "7ff"]
    for k, blocks in [(0, 2), (3, 5), (5, 7), (15, 16), (15, 17)]:
        for t in near_tables(k, blocks):
            at, mask = int(t.filter[0]), int(t.filter[1:], 16)
            assert mask
            for _ in range(50):
                a = rng.getrandbits(64)
                # b: a's key bits, the other bits random
                key_bits = sum(((1 << x.bits) - 1) << x.shift for x in t.blocks)
                b = (a & key_bits) | (rng.getrandbits(64) & ~key_bits)
                assert t.key(a) == t.key(b)
                assert a.to_bytes(8, "big")[at - 1] & mask == b.to_bytes(8, "big")[at - 1] & mask
    assert layout_problem(3, 6) is None
    assert "within k + 1 = 4" in (layout_problem(3, 3) or "")
    assert "84 near tables" in (layout_problem(3, 9) or "")


def test_a_near_layout_that_cannot_be_is_refused_at_start() -> None:
    settings = Settings({"CRAWL_SIMHASH_K": 3, "CRAWL_DEDUPE_NEAR_BLOCKS": 9})
    with pytest.raises(ConfigError, match="CRAWL_DEDUPE_NEAR_BLOCKS=9: makes 84 near tables"):
        DedupeConfig.from_settings(settings).validate()
    settings = Settings({"CRAWL_SIMHASH_K": 3, "CRAWL_DEDUPE_NEAR_BLOCKS": 6})
    DedupeConfig.from_settings(settings).validate()


async def test_the_first_worker_fixes_the_layout_and_the_others_use_it(
    make_index: MakeIndex,
) -> None:
    """A worker set to 6 blocks creates the index (20 tables); a worker set to
    the default is told so by the script on its first page and uses 6 too;
    near copies found by either are found by both."""
    wide = make_index(blocks=6)
    assert len(wide.tables) == 20
    assert (await wide.check_and_add(sha1("a"), BASE, "http://a.test/a", "h")).kind == "new"
    default = make_index()
    got = await default.check_and_add(sha1("b"), flip(BASE, 3, 30, 60), "http://a.test/b", "h")
    assert (got.kind, got.distance, got.original) == (DedupeKind.NEAR, 3, "http://a.test/a")
    assert default.n_blocks == 6 and len(default.tables) == 20
    assert (await default.redis.hget(default.keys.dedupe_config, "b")) == b"6"
    with pytest.raises(ValueError, match="blocks=3"):
        make_index(blocks=3)


async def test_the_status_shows_the_index_and_its_layout(make_index: MakeIndex) -> None:
    index = make_index("shown", load=2, near_min_level=1)
    assert (await index_figures(index.redis, index.keys))["layout"] == "none"
    rng = random.Random(4)
    pages = [
        (sha1(f"p{n}"), flip(BASE, n % 64) if n % 3 == 0 else rng.getrandbits(64), f"u{n}", "h")
        for n in range(300)
    ]
    copy = (*pages[5][:2], "copy of u5", "h")  # another URL: rechecked, u5 would count nothing
    verdicts = await index.check_and_add_many([*pages, copy])
    kinds = [v.kind for v in verdicts]
    figures = await index_figures(index.redis, index.keys)
    assert index.spread is not None
    sp = index.spread.spread
    levels = [int(await index.redis.hget(sp.near_state(0, p), "L") or 0) for p in range(16)]
    assert figures == {
        "pages": kinds.count(DedupeKind.NEW),
        "exact": kinds.count(DedupeKind.EXACT),
        "near": kinds.count(DedupeKind.NEAR),
        "layout": "growing",
        "near_tables": 10,
        "near_level": min(levels) + 4,  # a whole table's: its parts' + log2(16)
        "parts": 16,
    }
    assert figures["near_level"] > 1 and figures["exact"] == 1 and figures["near"] > 0
    # An index from before the growing layout (refused by workers) is shown as it is.
    old = make_index("old")
    await old.redis.hset(old.keys.dedupe_config, mapping={"k": 3, "fv": 2})
    figures = await index_figures(old.redis, old.keys)
    assert (figures["layout"], figures["near_tables"], figures["near_level"]) == ("fixed", 4, None)
    # A one-tag index (workers refuse it): the command that makes it spread.
    await old.redis.hset(old.keys.dedupe_config, "b", 5)
    figures = await index_figures(old.redis, old.keys)
    assert (figures["layout"], figures["near_tables"], figures["pages"]) == ("one-tag", 10, 0)
    assert index_layout(figures) == "one-tag index: run crawlproject dedupe migrate"
