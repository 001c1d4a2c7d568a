"""The duplicate index's near layout (crawlproject/dedupe/spread.py): how
the 64 SimHash bits are cut into blocks and which blocks key each table, after
Manku, Jain and Das Sarma (2007). Pure functions: the settings check them
before any Redis is touched."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

SIMHASH_BITS = 64
# Entries per bucket on average (a part splits one bucket per LOAD inserts):
# a lookup scans about this many SimHashes per table; each bucket is a Redis
# key (~80 bytes of its own), so fewer would cost memory per page.
DEDUPE_LOAD = 32
# The near tables' first level (2**10 buckets each): a small crawl makes few keys.
NEAR_MIN_LEVEL = 10
KEY_BITS_SENT = 48  # a table key's low bits sent to the script (Lua's doubles)
# k up to this gets b = k + 2 blocks (C(k+2, 2) tables, 21 at k = 5); above, k + 1.
WIDE_LAYOUT_MAX_K = 5
MAX_NEAR_TABLES = 64  # C(b, k) tables: each costs 8 bytes a page and an APPEND


@dataclass(frozen=True, slots=True)
class Block:
    shift: int  # right shift that brings the block to the low bits
    bits: int

    def value(self, simhash: int) -> int:
        return (simhash >> self.shift) & ((1 << self.bits) - 1)


def split_blocks(n: int) -> tuple[Block, ...]:
    """The 64 bits cut into n blocks, most significant first, widths as even as
    possible (the wider ones first): 4 -> 4 x 16 bits; 6 -> 11, 11, 11, 11, 10, 10."""
    base, extra = divmod(SIMHASH_BITS, n)
    blocks, top = [], SIMHASH_BITS
    for i in range(n):
        bits = base + (1 if i < extra else 0)
        top -= bits
        blocks.append(Block(top, bits))
    return tuple(blocks)


def default_blocks(k: int) -> int:
    """b for a new index: k + 2 (C(k+2, 2) tables keyed by two blocks) up to k = 5."""
    return k + 2 if k <= WIDE_LAYOUT_MAX_K else k + 1


@dataclass(frozen=True, slots=True)
class NearTable:
    """One table: its b - k blocks, most significant first. Its key puts the
    least significant block lowest (Spread.near_split_bit reads it so)."""

    blocks: tuple[Block, ...]

    def key(self, simhash: int) -> int:
        key = shift = 0
        for block in reversed(self.blocks):
            key |= block.value(simhash) << shift
            shift += block.bits
        return key

    @property
    def filter(self) -> str:
        """The table's test before a distance: which byte of an entry (1-8,
        big-endian) holds most of the key's bits, and those bits' mask, as 3
        characters (digit, 2 hex digits). An entry of the query's bucket can be
        found through this table only if its whole key is the query's (a page
        within k bits shares some table's whole key, and is found there), so an
        entry whose byte differs under the mask is passed over unread."""
        best = (0, 1, 0)  # (key bits in the byte, byte, mask)
        for byte in range(1, 9):
            low = (8 - byte) * 8  # the byte's lowest bit, 0 = the SimHash's least significant
            mask = 0
            for block in self.blocks:
                for bit in range(max(low, block.shift), min(low + 8, block.shift + block.bits)):
                    mask |= 1 << (bit - low)
            if mask.bit_count() > best[0]:
                best = (mask.bit_count(), byte, mask)
        return f"{best[1]}{best[2]:02x}"


def near_width(k: int, blocks: int) -> int:
    """The narrowest table's key bits: its blocks - k blocks the narrowest
    (with 48 and 40, the cap on a near table's level)."""
    base, extra = divmod(SIMHASH_BITS, blocks)
    chosen = blocks - k
    return base * chosen + max(0, chosen - (blocks - extra))


def near_tables(k: int, blocks: int) -> tuple[NearTable, ...]:
    """The C(blocks, k) tables: every choice of blocks - k of the blocks, in
    lexicographic order."""
    cut = split_blocks(blocks)
    return tuple(
        NearTable(tuple(cut[i] for i in chosen))
        for chosen in itertools.combinations(range(blocks), blocks - k)
    )


def layout_problem(k: int, blocks: int) -> str | None:
    """Why ``blocks`` cannot be a near layout for ``k`` (None: it can)."""
    if not k + 1 <= blocks <= SIMHASH_BITS:
        return f"must be within k + 1 = {k + 1} and {SIMHASH_BITS} (k={k})"
    tables = math.comb(blocks, k)
    if tables > MAX_NEAR_TABLES:
        return f"makes {tables} near tables for k={k}, more than {MAX_NEAR_TABLES}"
    return None
