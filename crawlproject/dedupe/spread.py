"""Where the spread duplicate index keeps each page (pure functions, no Redis).

An index on one hash tag (the one-tag layout, removed in issue 42:
crawlproject/dedupe/migrate.py moves one) sat on one hash slot, so one master
and one core carried every page's check. The spread layout cuts it into
parts, each on its own hash tag, so a page's check is a few single-slot calls
that run in parallel on their masters (crawlproject/dedupe/spread_index.py):

* near table t (of the C(b, k) tables of layout.py) is cut into P parts by the
  top log2(P) bits of its key, which are its first block's: a page within k
  bits of a query shares some table's whole key with it (pigeonhole), so it
  sits in the query's part of that table. The tables whose first block is
  the same (block g: the near group g, k + 1 groups) share their parts' tags,
  so a page's lookups are k + 1 calls, not C(b, k);
* the exact index into P parts by the top bits of the SHA-1's first byte;
* the originals (``o:<bb>``) into P parts by the top bits of the page id's
  first byte;
* the per-host duplicate streaks and the counters into P parts by a CRC-32
  of the host.

Each part of a table or of the exact index grows by linear hashing on its own
(its own level and split pointer), from a first level log2(P) below the
whole table's, so the parts of a table hold as many buckets as the table
did. A part's tag is chosen so that the (T + 3) x P tags sit evenly over the
16,384 slots, the parts numbered p = 0, 1, ... each taking one run of
consecutive slots for all its families: a master that owns a share of the
slots (as ``redis-cli --cluster create`` and ``rebalance`` give them, in
ranges) owns that share of the parts, whatever the crawl's name.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

from crawlproject.dedupe.layout import NearTable, near_tables, split_blocks

# The search for a tag in its run is shared with the frontier's shards.
from crawlproject.frontier.store.hash_slots import HASH_SLOTS, tag_in_run

# Parts per table (and of the exact index, originals, hosts) of a new index:
# 7 x 16 = 112 tags for k = 3, 16 of each family, so any master that owns a
# share of the slots owns about that share of the work (+- one part of
# 16 in its ranges); a batch of 64 pages still brings 4 lookups to a part's
# one call. Fixed in the index's ``cfg`` at its creation.
DEDUPE_PARTS = 16
MAX_PARTS = 128  # (64 tables + 3) x 128 tags stay within the 16,384 slots
EXACT_LEVEL_BITS = 16  # a whole exact index's first level (SHA-1 bytes 1-2)
MAX_LEVEL = 40  # the scripts' bucket numbers stay exact in Lua's doubles

# Families after the near tables 0..T-1.
EXACT, ORIGINALS, HOSTS = "x", "o", "h"


def parts_problem(parts: int) -> str | None:
    """Why ``parts`` cannot be a spread index's part count (None: it can)."""
    if parts < 1 or parts & (parts - 1) or parts > MAX_PARTS:
        return f"must be a power of 2 within 1..{MAX_PARTS}, not {parts}"
    return None


@functools.lru_cache(maxsize=16)
def part_tags(crawl: str, families: tuple[str, ...], parts: int) -> tuple[str, ...]:
    """The hash tag of every (part, family), part-major: tag ``g = p x F + f``
    has its slot in the g-th of F x P equal runs of the slot space. The tag is
    ``<crawl>/dd/<family>.<part>`` with ``~<n>``, the first n that lands there,
    appended when n > 0 (about F x P tries a tag)."""
    count = len(families) * parts
    if count > HASH_SLOTS:
        raise ValueError(f"{count} parts do not fit in {HASH_SLOTS} slots")
    return tuple(
        tag_in_run(f"{crawl}/dd/{family}.{p}", p * len(families) + f, count)
        for p in range(parts)
        for f, family in enumerate(families)
    )


def linear_address(x: int, level: int, split: int) -> int:
    """Linear hashing's bucket of key ``x`` at level L and split pointer s."""
    a = x % (1 << level)
    return x % (1 << (level + 1)) if a < split else a


@dataclass(frozen=True)
class Spread:
    """One crawl's spread layout: k, b blocks, P parts and the buckets' load."""

    crawl: str
    k: int
    blocks: int
    parts: int
    load: int
    near_min_level: int  # the whole table's first level (a part's: log2(parts) below)

    def __post_init__(self) -> None:
        if problem := parts_problem(self.parts):
            raise ValueError(f"parts: {problem}")
        narrowest = min(b.bits for b in split_blocks(self.blocks))
        if self.part_bits > narrowest:
            # A part is chosen by a table's first block alone (its group's).
            raise ValueError(
                f"parts: {self.parts} parts need blocks of {self.part_bits} bits at least, "
                f"the layout of {self.blocks} blocks has some of {narrowest}"
            )

    @functools.cached_property
    def tables(self) -> tuple[NearTable, ...]:
        return near_tables(self.k, self.blocks)

    @functools.cached_property
    def groups(self) -> tuple[int, ...]:
        """Each table's near group: the number of its first block."""
        cut = split_blocks(self.blocks)
        return tuple(cut.index(table.blocks[0]) for table in self.tables)

    @functools.cached_property
    def families(self) -> tuple[str, ...]:
        near = sorted(set(self.groups))
        return (*(f"n{g}" for g in near), EXACT, ORIGINALS, HOSTS)

    @functools.cached_property
    def part_bits(self) -> int:
        return self.parts.bit_length() - 1

    @functools.cached_property
    def _tags(self) -> tuple[str, ...]:
        return part_tags(self.crawl, self.families, self.parts)

    def prefix(self, family: str, part: int) -> str:
        """The key prefix ``cp:{<tag>}:`` of one part of one family."""
        index = part * len(self.families) + self.families.index(family)
        return f"cp:{{{self._tags[index]}}}:"

    def all_prefixes(self) -> list[str]:
        return [f"cp:{{{tag}}}:" for tag in self._tags]

    # -- near tables ---------------------------------------------------------------

    def table_width(self, t: int) -> int:
        return sum(b.bits for b in self.tables[t].blocks)

    def near_part(self, t: int, simhash: int) -> tuple[int, int]:
        """(part, key) of the SimHash in table t: the part is the key's top bits
        (its first block's, the same in every table of its group)."""
        key = self.tables[t].key(simhash)
        return key >> (self.table_width(t) - self.part_bits), key

    def near_family(self, t: int) -> str:
        return f"n{self.groups[t]}"

    def near_state(self, t: int, part: int) -> str:
        """The state of table t's part: its group's part's, which every table
        of the group shares (they hold the same pages)."""
        return state_key(self.prefix(self.near_family(t), part))

    def group_tables(self, family: str) -> list[int]:
        return [t for t in range(len(self.tables)) if self.near_family(t) == family]

    def group_max(self, family: str) -> int:
        """A near group's part's last level: its narrowest table's."""
        return min(self.near_max(t) for t in self.group_tables(family))

    def near_min(self) -> int:
        return max(0, self.near_min_level - self.part_bits)

    def near_max(self, t: int) -> int:
        """A near part's last level: its key bits below the part's."""
        return min(self.table_width(t) - self.part_bits, MAX_LEVEL)

    def near_split_bit(self, t: int, level: int) -> tuple[int, int]:
        """(entry byte 1-8, mask) that holds bit ``level`` of table t's key in a
        SimHash entry (8 bytes, big-endian): what a split at that level reads."""
        j = level
        for block in reversed(self.tables[t].blocks):
            if j < block.bits:
                bit = block.shift + j  # 0 = the SimHash's least significant
                return 8 - bit // 8, 1 << (bit % 8)
            j -= block.bits
        raise ValueError(f"table {t} has no key bit {level}")

    # -- the exact index ------------------------------------------------------------

    def exact_min(self) -> int:
        """The exact parts' first level: bucket, part and entry hold 80 bits."""
        return EXACT_LEVEL_BITS - self.part_bits

    def exact_max(self) -> int:
        return min(MAX_LEVEL, self.exact_min() + 32)

    def exact_part(self, digest: bytes) -> tuple[int, int, bytes]:
        """(part, key x, entry) of a SHA-1: the part is byte 1's top bits; x is
        bytes 1-2 below them, then bytes 3-6 read little-endian; the entry is
        bytes 3-10."""
        low = self.exact_min()
        part = digest[0] >> (8 - self.part_bits) if self.part_bits else 0
        head = (digest[0] * 256 + digest[1]) % (1 << low)
        return part, head + (int.from_bytes(digest[2:6], "little") << low), digest[2:10]

    def exact_split_bit(self, level: int) -> tuple[int, int]:
        """(entry byte 1-8, mask) of bit ``level`` of x in an exact entry."""
        j = level - self.exact_min()
        return j // 8 + 1, 1 << (j % 8)

    # -- originals and hosts -----------------------------------------------------------

    def originals_of(self, page_id: bytes) -> tuple[str, bytes]:
        """(hash key, field) of a page id's original URL (id: 8 bytes)."""
        part = page_id[0] >> (8 - self.part_bits) if self.part_bits else 0
        return f"{self.prefix(ORIGINALS, part)}o:{page_id[:2].hex()}", page_id[2:8]

    def host_part(self, host: str) -> int:
        return zlib.crc32(host.encode("utf-8")) % self.parts

    def streak_key(self, part: int) -> str:
        return self.prefix(HOSTS, part) + "streak"

    def counters_key(self, part: int) -> str:
        return self.prefix(HOSTS, part) + "n"

    def signature(self, features_version: int) -> str:
        """What every exact part records at its first page and checks at each:
        a worker of another layout is refused there, before it writes."""
        return (
            f"k{self.k}.fv{features_version}.b{self.blocks}.P{self.parts}"
            f".l{self.load}.m{self.near_min_level}"
        )


def bucket_key(prefix: str, table: int | None, bucket: int) -> str:
    """A bucket of a part: ``x:<a>`` (table None) or ``s:<t>:<a>`` (a in hex,
    4 digits at least)."""
    if table is None:
        return f"{prefix}x:{bucket:04x}"
    return f"{prefix}s:{table}:{bucket:04x}"


def state_key(prefix: str) -> str:
    """A part's linear-hashing state: HASH ``L``, ``s``, ``n`` (an exact
    part's also ``sig``)."""
    return prefix + "st"
