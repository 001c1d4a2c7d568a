"""A model of the frontier's seen set (crawlproject/frontier/lua/_seen.lua) in
Python, for tests and benchmarks: where a fingerprint goes, and the whole
state the script builds from a sequence of new fingerprints, written straight
into Redis (``load_exact``, ``load_bloom``: a benchmark fills 100 million URLs
in minutes instead of hours through Lua; tests/test_seen_set.py checks that
the model and the script build the same bytes).

``SEEN_DRIVER`` is a script around the real ``_seen.lua`` (after the real
shard prelude): ARGV = P, spec, fingerprint...; it answers one character per
fingerprint, ``1`` seen before, ``0`` new (and added), so a test or benchmark
drives the seen set alone, with large batches.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import redis

from crawlproject.frontier.keys import CrawlKeys
from crawlproject.frontier.seen import BLOCK_BITS, BUCKET_GROUP, SPLIT_LOAD, BloomShape
from crawlproject.lua import SHARD_PRELUDE, load_script

SEEN_DRIVER = load_script("crawlproject.frontier", "_seen", SHARD_PRELUDE) + (
    "\nseen_open(ARGV[2])\nlocal out = {}\nfor i = 3, #ARGV do\n"
    "  out[#out + 1] = seen_test_and_add(ARGV[i]) and '1' or '0'\nend\n"
    "seen_close()\nreturn table.concat(out)\n"
)

# -- exact: linear hashing ----------------------------------------------------------


def table_size(n: int, load: int = SPLIT_LOAD) -> tuple[int, int]:
    """(L, s) after ``n`` adds: the script splits whenever n > load (2^L + s),
    one bucket per add at most, so it holds ceil(n / load) buckets (at least 1)."""
    buckets = max(1, -(-n // load))
    level = buckets.bit_length() - 1
    return level, buckets - (1 << level)


def x_of(fp: bytes) -> int:
    return int.from_bytes(fp[:6], "little")


def address(fp: bytes, level: int, split: int) -> tuple[int, int]:
    """(bucket, depth) of a fingerprint in a table of 2^level + split buckets."""
    x = x_of(fp)
    a = x % (1 << level)
    if a < split:
        return x % (1 << (level + 1)), level + 1
    return a, level


def entry(fp: bytes, depth: int) -> bytes:
    """What a bucket of that depth stores: the bytes its number does not imply."""
    return fp[depth // 8 : 8]


def exact_buckets(fps: np.ndarray, load: int = SPLIT_LOAD) -> Iterator[tuple[int, bytes]]:
    """(bucket, its string) of the table the script builds from ``fps``
    (n x 8 uint8, in the order added; all distinct). Entries keep their order
    of arrival: a split keeps the order of what it partitions."""
    level, split = table_size(len(fps), load)
    weights = np.array([1 << (8 * i) for i in range(6)], dtype=np.uint64)
    x = (fps[:, :6].astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    a = x & np.uint64((1 << level) - 1)
    deep = a < np.uint64(split)
    a = np.where(deep, x & np.uint64((1 << (level + 1)) - 1), a)
    deep |= a >= np.uint64(1 << level)
    for depth, rows in ((level, ~deep), (level + 1, deep)):
        if not rows.any():
            continue
        sel = np.flatnonzero(rows)
        order = sel[np.argsort(a[sel], kind="stable")]
        sorted_a = a[order]
        cut = depth // 8
        data = np.ascontiguousarray(fps[order, cut:]).tobytes()
        width = 8 - cut
        bounds = np.flatnonzero(np.diff(sorted_a)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [len(order)]])
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            yield int(sorted_a[start]), data[start * width : end * width]


def load_exact(
    client: redis.Redis,
    keys: CrawlKeys,
    shard: int,
    fps: np.ndarray,
    load: int = SPLIT_LOAD,
    batch: int = 20,
) -> None:
    """Writes the shard's table for ``fps`` as the script would have built
    it, into an empty shard (``batch``: hashes of buckets per round trip)."""
    groups: dict[int, dict[int, bytes]] = {}
    for bucket, data in exact_buckets(fps, load):
        groups.setdefault(bucket // BUCKET_GROUP, {})[bucket % BUCKET_GROUP] = data
    pipe = client.pipeline(transaction=False)
    for i, (group, fields) in enumerate(sorted(groups.items())):
        pipe.hset(keys.seen_buckets(shard, group), mapping=fields)  # type: ignore[arg-type]
        if i % batch == batch - 1:
            pipe.execute()
    level, split = table_size(len(fps), load)
    pipe.hset(keys.seen_state(shard), mapping={"L": level, "s": split, "n": len(fps)})
    pipe.execute()


def stored_buckets(client: redis.Redis, keys: CrawlKeys, shard: int) -> dict[int, bytes]:
    """bucket -> its string, as the shard's hashes hold them."""
    out: dict[int, bytes] = {}
    prefix = keys.seen_buckets(shard, 0)[:-1]  # ...:seen:
    for key in client.scan_iter(match=prefix + "*", count=1000):
        group = int(key[len(prefix) :])
        for field, data in client.hgetall(key).items():
            out[group * BUCKET_GROUP + int(field)] = bytes(data)  # type: ignore[arg-type]
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
