"""A model of the spread duplicate index (crawlproject/dedupe/spread.py) in
Python, for benchmarks: the buckets, part states and originals that the
spread scripts leave for a run of new pages, as RESP per part (``part_resp``),
so bench/dedupe_index.py fills 10 million pages in a minute or two instead of
an hour through Lua, on one server or on each part's cluster node.
tests/test_dedupe_spread.py checks that the model and the scripts build the
same strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from crawlproject.dedupe.spread import EXACT, ORIGINALS, Spread, state_key
from testkit.dedupe_table import _address, command_head, hex_digits, level_after, records, sets


def _hset(key: str, fields: dict[str, str | int]) -> bytes:
    parts = [key.encode()]
    for name, value in fields.items():
        parts += [name.encode(), str(value).encode()]
    head = command_head("HSET", len(parts))
    return head + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def part_resp(
    spread: Spread,
    signature: str,
    digests: np.ndarray,
    sims: np.ndarray,
    urls: np.ndarray | Callable[[np.ndarray], np.ndarray] | None,
) -> Iterator[tuple[str, bytes]]:
    """(a key of the part, its RESP) for every part the pages fill: digests
    (n, 10) uint8 (SHA-1 bytes 1-10), sims (n,) uint64, urls (n, w) uint8 of
    one length, or a function from row numbers to those rows' urls (None: no
    originals). All pages are new, stored in one go. Yielded part by part, so
    a caller that sends each at once holds one part's RESP, not the index's
    (100 million pages: ~15 GB of RESP)."""
    n = len(sims)
    pb = spread.part_bits
    sim_bytes = sims.astype(">u8").view(np.uint8).reshape(n, 8)
    # Exact: part = byte 1's top bits; x = bytes 1-2 below them + bytes 3-6 LE.
    # One digest column at a time: all ten as uint64 would be 80 B a page.
    low = spread.exact_min()

    def d(j: int) -> np.ndarray:
        return digests[:, j].astype(np.uint64)

    head = ((d(0) << np.uint64(8)) | d(1)) % np.uint64(1 << low)
    le = d(2) | d(3) << np.uint64(8) | d(4) << np.uint64(16) | d(5) << np.uint64(24)
    x = head | (le << np.uint64(low))
    del head, le
    xpart = (d(0) >> np.uint64(8 - pb)) if pb else np.zeros(n, dtype=np.uint64)
    for p in range(spread.parts):
        rows = np.nonzero(xpart == np.uint64(p))[0]
        prefix = spread.prefix(EXACT, p)
        level, split = level_after(len(rows), spread.load, low, spread.exact_max())
        out = sets(
            (prefix + "x:").encode(), _address(x[rows], level, split), digests[rows][:, 2:10]
        )
        fields = {"L": level, "s": split, "n": len(rows), "sig": signature}
        yield prefix, out + _hset(state_key(prefix), fields)
    states: dict[str, dict[str, str | int]] = {}
    for t, table in enumerate(spread.tables):
        key = np.zeros(n, dtype=np.uint64)
        shift = 0
        for block in reversed(table.blocks):
            value = (sims >> np.uint64(block.shift)) & np.uint64((1 << block.bits) - 1)
            key |= value << np.uint64(shift)
            shift += block.bits
        part = key >> np.uint64(spread.table_width(t) - pb)
        family = spread.near_family(t)
        for p in range(spread.parts):
            rows = np.nonzero(part == np.uint64(p))[0]
            prefix = spread.prefix(family, p)
            # The group's tables hold the same pages: one state, one level.
            first, last = spread.near_min(), spread.group_max(family)
            level, split = level_after(len(rows), spread.load, first, last)
            buckets = _address(key[rows], level, split)
            yield prefix, sets(f"{prefix}s:{t}:".encode(), buckets, sim_bytes[rows])
            states[spread.near_state(t, p)] = {"L": level, "s": split, "n": len(rows)}
    for state, fields in states.items():
        yield state, _hset(state, fields)
    if urls is not None:
        opart = (sim_bytes[:, 0] >> (8 - pb)) if pb else np.zeros(n, dtype=np.uint8)
        for p in range(spread.parts):
            prefix = spread.prefix(ORIGINALS, p)
            rows = np.nonzero(opart == p)[0]
            part_urls = urls[rows] if isinstance(urls, np.ndarray) else urls(rows)
            okey = f"{prefix}o:".encode()
            yield (
                prefix,
                records(
                    len(rows),
                    [
                        command_head("HSETNX", 3) + b"$%d\r\n" % (len(okey) + 4) + okey,
                        hex_digits(sims[rows] >> np.uint64(48), 4),
                        b"\r\n$6\r\n",
                        sim_bytes[rows, 2:8],
                        b"\r\n$%d\r\n" % part_urls.shape[1],
                        part_urls,
                        b"\r\n",
                    ],
                ),
            )
