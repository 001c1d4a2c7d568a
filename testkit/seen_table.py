"""A model of the frontier's seen set (crawlproject/frontier/store/lua/_seen.lua) in
Python, for tests and benchmarks: where a fingerprint goes, and the whole
state the script builds from a set of new fingerprints, written straight
into Redis (``load_exact``, ``load_bloom``: a benchmark fills 100 million URLs
in minutes instead of hours through Lua; tests/test_seen_set.py checks that
the model and the script build the same sets and bits).

``SEEN_DRIVER`` is a script around the real ``_seen.lua`` (after the real
shard prelude): ARGV = P, spec, fingerprint...; it answers one character per
fingerprint, ``1`` seen before, ``0`` new (and added), so a test or benchmark
drives the seen set alone, with large batches.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import redis

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.seen_set import BLOCK_BITS, MIN_LEVEL, SPLIT_LOAD, BloomShape
from crawlproject.lua import SHARD_PRELUDE, load_script

SEEN_DRIVER = load_script("crawlproject.frontier.store", "_seen", SHARD_PRELUDE) + (
    "\nseen_open(ARGV[2])\nlocal out = {}\nfor i = 3, #ARGV do\n"
    "  out[#out + 1] = seen_test_and_add(ARGV[i]) and '1' or '0'\nend\n"
    "seen_close()\nreturn table.concat(out)\n"
)

# -- exact: linear hashing over sets of integers -------------------------------------


def table_size(n: int, load: int = SPLIT_LOAD) -> tuple[int, int]:
    """(L, s) after ``n`` adds: the script starts with 2^11 buckets and splits
    whenever n > load (2^L + s), one bucket per add at most, so it holds
    ceil(n / load) buckets, and at least 2^11."""
    buckets = max(1 << MIN_LEVEL, -(-n // load))
    level = buckets.bit_length() - 1
    return level, buckets - (1 << level)


def x_of(fp: bytes) -> int:
    return int.from_bytes(fp[:6], "little")


def address(fp: bytes, level: int, split: int) -> int:
    """The bucket of a fingerprint in a table of 2^level + split buckets."""
    x = x_of(fp)
    a = x % (1 << level)
    return x % (1 << (level + 1)) if a < split else a


def member(fp: bytes) -> int:
    """What a bucket stores of a fingerprint: v >> 11 (v: its 8 bytes, little-endian)."""
    return int.from_bytes(fp, "little") >> MIN_LEVEL


def fingerprint(bucket: int, m: int) -> bytes:
    """The fingerprint a bucket's member stands for (the bucket holds its low 11 bits)."""
    return ((m << MIN_LEVEL) | (bucket % (1 << MIN_LEVEL))).to_bytes(8, "little")


def exact_buckets(fps: np.ndarray, load: int = SPLIT_LOAD) -> Iterator[tuple[int, np.ndarray]]:
    """(bucket, its members as uint64) of the table the script builds from
    ``fps`` (n x 8 uint8, all distinct; in any order: a set has none)."""
    level, split = table_size(len(fps), load)
    v = np.ascontiguousarray(fps).view("<u8").ravel()
    x = v & np.uint64((1 << 48) - 1)
    a = x & np.uint64((1 << level) - 1)
    a = np.where(a < np.uint64(split), x & np.uint64((1 << (level + 1)) - 1), a)
    members = v >> np.uint64(MIN_LEVEL)
    order = np.argsort(a, kind="stable")
    sorted_a = a[order]
    bounds = np.flatnonzero(np.diff(sorted_a)) + 1
    starts = np.concatenate([[0], bounds]).astype(np.int64)
    ends = np.concatenate([bounds, [len(order)]]).astype(np.int64)
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        if end > start:
            yield int(sorted_a[start]), members[order[start:end]]


def load_exact(
    client: redis.Redis,
    keys: CrawlKeys,
    shard: int,
    fps: np.ndarray,
    load: int = SPLIT_LOAD,
    batch: int = 2000,
) -> None:
    """Writes the shard's table for ``fps`` as the script would have built
    it, into an empty shard (``batch``: buckets per round trip)."""
    pipe = client.pipeline(transaction=False)
    for i, (bucket, members) in enumerate(exact_buckets(fps, load)):
        pipe.sadd(keys.seen_bucket(shard, bucket), *map(str, members.tolist()))
        if i % batch == batch - 1:
            pipe.execute()
    level, split = table_size(len(fps), load)
    pipe.hset(keys.seen_state(shard), mapping={"L": level, "s": split, "n": len(fps)})
    pipe.execute()


def stored_buckets(client: redis.Redis, keys: CrawlKeys, shard: int) -> dict[int, set[int]]:
    """bucket -> its members, as the shard's sets hold them."""
    out: dict[int, set[int]] = {}
    prefix = keys.seen_bucket(shard, 0)[:-1]  # ...:seen:
    for key in client.scan_iter(match=prefix + "*", count=1000):
        bucket = int(key[len(prefix) :])
        out[bucket] = {int(m) for m in client.smembers(key)}  # type: ignore[union-attr]
    return out


def stored_fingerprints(client: redis.Redis, keys: CrawlKeys, shard: int) -> set[bytes]:
    """Every fingerprint the shard's sets hold; checks each sits in its bucket."""
    state = client.hgetall(keys.seen_state(shard))
    level = int(state.get(b"L", MIN_LEVEL))  # type: ignore[union-attr]
    split = int(state.get(b"s", 0))  # type: ignore[union-attr]
    out = set()
    for bucket, members in stored_buckets(client, keys, shard).items():
        for m in members:
            fp = fingerprint(bucket, m)
            assert address(fp, level, split) == bucket, (bucket, fp.hex())
            out.add(fp)
    return out


# -- Bloom ----------------------------------------------------------------------------


def bloom_positions(fps: np.ndarray, shape: BloomShape) -> tuple[np.ndarray, np.ndarray]:
    """(segment, k bit offsets in it) per fingerprint, as _seen.lua computes them."""
    f = fps.astype(np.uint64)
    a = (f[:, 0] << 32) | (f[:, 1] << 24) | (f[:, 2] << 16) | (f[:, 3] << 8) | f[:, 4]
    block = a % np.uint64(shape.blocks)
    per = np.uint64(shape.per_segment)
    seg, at = block // per, (block % per) * np.uint64(BLOCK_BITS)
    h = (f[:, 5] << 16) | (f[:, 6] << 8) | f[:, 7]
    bits = np.uint64(BLOCK_BITS)
    first = h % bits
    step = np.uint64(2) * ((h // bits) % (bits // np.uint64(2))) + np.uint64(1)
    steps = np.arange(shape.k, dtype=np.uint64)
    return seg, at[:, None] + (first[:, None] + steps[None, :] * step[:, None]) % bits


def load_bloom(
    client: redis.Redis,
    keys: CrawlKeys,
    shard: int,
    fps: np.ndarray,
    shape: BloomShape,
    chunk: int = 2_000_000,
) -> None:
    """Sets the bits of ``fps`` in the shard's segments (made by prepare:
    written in place, so their size stays the one seen_init gave them)."""
    width = shape.segment_bytes * 8
    bits = np.zeros(shape.segments * width, dtype=np.uint8)  # a byte per bit, packed below
    for start in range(0, len(fps), chunk):
        seg, pos = bloom_positions(fps[start : start + chunk], shape)
        bits[(seg[:, None] * np.uint64(width) + pos).ravel()] = 1
    for i in range(shape.segments):
        packed = np.packbits(bits[i * width : (i + 1) * width]).tobytes()
        client.setrange(keys.bloom_segment(shard, i), 0, packed)
    client.hincrby(keys.seen_state(shard), "n", len(fps))
