"""RESP records for loading a duplicate index straight into Redis, in Python
(numpy), for tests and benchmarks: testkit/dedupe_spread_table.py builds the
spread index's parts with them, so a benchmark fills 10 million pages in a
minute or two instead of an hour through Lua. (The model of the one-tag
layout, dedupe.lua's, went with it in issue 42: git show 7bca5c2:testkit/dedupe_table.py.)
"""

from __future__ import annotations

import numpy as np

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


def sets(name: bytes, buckets: np.ndarray, entries: np.ndarray) -> bytes:
    """SET each bucket (``name`` + its number in hex, at least 4 digits) to its
    entries (8 bytes each) in page order: a part's buckets, which the scripts
    write whole."""
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
