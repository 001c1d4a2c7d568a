"""Where a crawl's hash tags land among Redis Cluster's 16,384 slots.

``redis-cli --cluster create`` and ``rebalance`` give each master one equal
run of consecutive slots (or a few runs adding up to its share). A tag left
to CRC16 lands anywhere: 32 shards fell 12/13/7 on 3 masters. A tag searched
for so that tag g of G sits in the g-th of G equal runs puts an equal share of
the tags on every master that owns an equal share of the slots (up to G
masters), and a reshard that moves a run moves exactly its tags.

The search, shared by the frontier's shards (keys.py, ``shard_tags`` in the
crawl's meta) and the spread duplicate index's parts (dedupe/spread.py): the
tag is ``<base>`` if it already lands in its run, else ``<base>~<n>`` for the
first n >= 1 that does (about G tries a tag).
"""

from __future__ import annotations

import functools
from binascii import crc_hqx

SLOTS = 16384  # Redis Cluster's hash slots

# The shard tag schemes, the crawl's meta field ``shard_tags`` (keys.py). A
# crawl whose meta has ``shards`` and no ``shard_tags`` was made before it:
# plain tags ``<crawl>/<s>``, never renamed (its keys hold the crawl).
EVEN = "even"
PLAIN = "plain"
SHARD_TAGS = (EVEN, PLAIN)


def slot_of(tag: str) -> int:
    """The slot of a key whose hash tag is ``tag`` (Redis's CRC16 XMODEM)."""
    return crc_hqx(tag.encode("utf-8"), 0) % SLOTS


def tag_in_run(base: str, run: int, runs: int) -> str:
    """``base``, or ``base~<n>`` for the first n >= 1, whose slot lies in the
    ``run``-th of ``runs`` equal runs of the slot space."""
    if not 0 <= run < runs <= SLOTS:
        raise ValueError(f"run {run} of {runs}: at most {SLOTS} runs of the slot space")
    lo, hi = run * SLOTS // runs, (run + 1) * SLOTS // runs
    if lo <= slot_of(base) < hi:
        return base
    # CRC16 runs on from the common head: each try hashes a few digits only.
    head = crc_hqx(f"{base}~".encode(), 0)
    n = 1
    while not lo <= crc_hqx(str(n).encode("ascii"), head) % SLOTS < hi:
        n += 1
    return f"{base}~{n}"


@functools.lru_cache(maxsize=64)
def shard_tags(crawl: str, shards: int, scheme: str = EVEN) -> tuple[str, ...]:
    """The hash tag of each of a crawl's shards: ``<crawl>/<s>`` (plain), or
    that in the s-th of ``shards`` equal runs (even). Even tags cost about
    shards^2 CRC16s of a few bytes, once a process (cached): 0.4 s at
    1,024 shards, 8 s at 4,096 (on a loaded 2-core machine)."""
    if scheme == PLAIN:
        return tuple(f"{crawl}/{s}" for s in range(shards))
    if scheme != EVEN:
        raise ValueError(f"shard tags {scheme!r}: must be one of {', '.join(SHARD_TAGS)}")
    if shards > SLOTS:
        raise ValueError(f"{shards} shards: even tags need at most {SLOTS} (one slot each)")
    return tuple(tag_in_run(f"{crawl}/{s}", s, shards) for s in range(shards))
