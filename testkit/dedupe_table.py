"""A model of the duplicate index's layouts (crawlproject/dedupe/lua/dedupe.lua)
in Python, for tests and benchmarks: the buckets the script builds from a run
of new pages, written straight into Redis as RESP (``resp_for_pages``), so a
benchmark fills 10 million pages in a minute or two instead of an hour through
Lua. tests/test_dedupe_index.py checks that the model and the script build the
same strings.

Two layouts: ``growing`` (the index's own: linear hashing, C(b, k) near
tables) and ``fixed`` (an index from before it: exact buckets by SHA-1 bytes
1-2, near strings by block value, never split), which the script still reads.
A page is its SHA-1 bytes 1-10 (an (n, 10) uint8 array) and its SimHash.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crawlproject.dedupe.fingerprint import FEATURES_VERSION
from crawlproject.dedupe.layout import (
    DEDUPE_LOAD,
    KEY_BITS_SENT,
    NEAR_MIN_LEVEL,
    default_blocks,
    near_tables,
    near_width,
)
from crawlproject.frontier.store.keys import CrawlKeys

EXACT_MIN_LEVEL = 16  # dedupe.lua's
MAX_LEVEL = 40
HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def level_after(n: int, load: int, min_level: int, max_level: int) -> tuple[int, int]:
    """(L, s) of a part after n inserts: one split per insert past load x
    buckets, so ceil(n / load) buckets, at least 2^min_level, at most 2^max_level."""
    buckets = min(max(1 << min_level, -(-n // load)), 1 << max_level)
    level = buckets.bit_length() - 1
    return level, buckets - (1 << level)


def _address(x: np.ndarray, level: int, split: int) -> np.ndarray:
    a = x % np.uint64(1 << level)
    wide = x % np.uint64(1 << (level + 1))
    return np.where(a < np.uint64(split), wide, a)


def exact_keys(digests: np.ndarray) -> np.ndarray:
    """x of each page: bytes 1-2 (b1 x 256 + b2), then bytes 3-6 read little-endian."""
    d = digests.astype(np.uint64)
    low = (d[:, 0] << np.uint64(8)) | d[:, 1]
    high = d[:, 2] | d[:, 3] << np.uint64(8) | d[:, 4] << np.uint64(16) | d[:, 5] << np.uint64(24)
    return low | (high << np.uint64(16))


@dataclass(frozen=True)
class Layout:
    """What an index of ``n`` pages looks like (n: pages with a SimHash, all new)."""

    k: int
    n: int
    growing: bool = True
    load: int = DEDUPE_LOAD
    near_min_level: int = NEAR_MIN_LEVEL

    @property
    def blocks(self) -> int:
        return default_blocks(self.k) if self.growing else self.k + 1

    def exact_level(self) -> tuple[int, int]:
        return level_after(self.n, self.load, EXACT_MIN_LEVEL, MAX_LEVEL)

    def near_level(self) -> tuple[int, int]:
        tables = near_tables(self.k, self.blocks)
        narrowest = min(sum(b.bits for b in t.blocks) for t in tables)
        assert narrowest == near_width(self.k, self.blocks)  # dedupe.lua's formula
        width = min(narrowest, KEY_BITS_SENT, MAX_LEVEL)
        return level_after(self.n, self.load, self.near_min_level, width)

    def exact_buckets(self, digests: np.ndarray) -> np.ndarray:
        x = exact_keys(digests)
        if not self.growing:
            return x & np.uint64(0xFFFF)
        return _address(x, *self.exact_level())

    def near_buckets(self, sims: np.ndarray) -> list[np.ndarray]:
        """Per table, each page's bucket."""
        out = []
        level, split = self.near_level()
        for table in near_tables(self.k, self.blocks):
            key = np.zeros(len(sims), dtype=np.uint64)
            shift = 0
            for block in reversed(table.blocks):
                value = (sims >> np.uint64(block.shift)) & np.uint64((1 << block.bits) - 1)
                if shift < 64:
                    key |= value << np.uint64(shift)
                shift += block.bits
            key &= np.uint64((1 << KEY_BITS_SENT) - 1)
            out.append(key if not self.growing else _address(key, level, split))
        return out

    def config(self) -> dict[str, int]:
        """The index's ``cfg`` fields."""
        cfg = {"k": self.k, "fv": FEATURES_VERSION}
        if self.growing:
            (xl, xs), (nl, ns) = self.exact_level(), self.near_level()
            cfg |= {"b": self.blocks, "load": self.load, "nmin": self.near_min_level}
            cfg |= {"xL": xl, "xs": xs, "xn": self.n, "nL": nl, "ns": ns, "nn": self.n}
        return cfg


def hex_digits(values: np.ndarray, digits: int) -> np.ndarray:
    shifts = np.arange(4 * (digits - 1), -1, -4, dtype=np.uint64)
    return HEX[((values.astype(np.uint64)[:, None] >> shifts) & np.uint64(15)).astype(np.intp)]


def records(n: int, parts: list[bytes | np.ndarray]) -> bytes:
    """n fixed-size records: constant byte strings and (n, w) uint8 columns, in order."""
    width = sum(len(p) if isinstance(p, bytes) else p.shape[1] for p in parts)
    out = np.empty((n, width), dtype=np.uint8)
    at = 0
    for p in parts:
        w = len(p) if isinstance(p, bytes) else p.shape[1]
        out[:, at : at + w] = np.frombuffer(p, dtype=np.uint8) if isinstance(p, bytes) else p
        at += w
    return out.tobytes()


def command_head(name: str, nargs: int) -> bytes:
    return f"*{nargs + 1}\r\n${len(name)}\r\n{name}\r\n".encode()


def appends(name: bytes, buckets: np.ndarray, entries: np.ndarray) -> bytes:
    """APPEND entries[i] (8 bytes) to ``name`` + bucket i in hex (at least 4
    digits, as the script names them), in page order within each bucket."""
    out = []
    digits = np.full(len(buckets), 4)
    for power in range(4, 12):
        digits += buckets >= np.uint64(16**power)
    for d in np.unique(digits):
        rows = np.nonzero(digits == d)[0]  # increasing: a bucket's pages keep their order
        key = len(name) + int(d)
        out.append(
            records(
                len(rows),
                [
                    command_head("APPEND", 2) + f"${key}\r\n".encode() + name,
                    hex_digits(buckets[rows], int(d)),
                    b"\r\n$8\r\n",
                    entries[rows],
                    b"\r\n",
                ],
            )
        )
    return b"".join(out)


def sets(name: bytes, buckets: np.ndarray, entries: np.ndarray) -> bytes:
    """SET each bucket (``name`` + its number in hex, at least 4 digits) to its
    entries (8 bytes each) in page order: a growing index's buckets, which the
    script writes whole."""
    order = np.argsort(buckets, kind="stable")
    data = entries[order].tobytes()
    values, starts, counts = np.unique(buckets[order], return_index=True, return_counts=True)
    set_head = command_head("SET", 2)
    out = []
    for value, start, count in zip(values.tolist(), starts.tolist(), counts.tolist(), strict=True):
        key = name + b"%04x" % value
        out.append(b"%s$%d\r\n%s\r\n$%d\r\n" % (set_head, len(key), key, 8 * count))
        out.append(data[8 * start : 8 * (start + count)])
        out.append(b"\r\n")
    return b"".join(out)


def resp_for_pages(keys: CrawlKeys, layout: Layout, digests: np.ndarray, sims: np.ndarray) -> bytes:
    """What dedupe.lua leaves in the buckets for these new pages (originals
    aside), at the buckets of ``layout`` (its n: the index's size once they are
    in): one SET a bucket (growing: all the index's pages at once), or the
    APPENDs of a release before the growing layout (fixed: any run of pages)."""
    prefix = keys.dedupe_prefix.encode()
    n = len(sims)
    sim_bytes = sims.astype(">u8").view(np.uint8).reshape(n, 8)
    write = sets if layout.growing else appends
    out = [write(prefix + b"x:", layout.exact_buckets(digests), digests[:, 2:10])]
    for t, buckets in enumerate(layout.near_buckets(sims)):
        out.append(write(prefix + f"s:{t}:".encode(), buckets, sim_bytes))
    return b"".join(out)
