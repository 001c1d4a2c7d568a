"""Where a crawl's hash tags land among Redis Cluster's 16,384 hash slots.

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

A shard's tag lands in the first RUN_HEAD slots of its run, not anywhere in
it: a master whose range of slots ends inside a run then holds that run's
shard if and only if it holds the run's start, so on the ranges
``redis-cli --cluster create`` gives M masters each holds floor or ceil of
S / M shards (32 shards: 11/11/10 on 3 masters, 4 at most on 9, 2 on 18; a
tag anywhere in its run gave 10-12, 5 and 3, for five crawl names). The
duplicate index's parts take their whole run (their tags are fixed in
existing indexes).
"""

from __future__ import annotations

import functools
from binascii import crc_hqx

HASH_SLOTS = 16384  # Redis Cluster's hash slots
# A shard's tag within the first 16 slots of its run: about 1,024 tries a tag
# (the whole run when it is shorter: 1,024 shards and more).
RUN_HEAD = 16

# The shard tag schemes, the crawl's meta field ``shard_tags`` (keys.py). A
# crawl whose meta has ``shards`` and no ``shard_tags`` was made before it:
# plain tags ``<crawl>/<s>``, never renamed (its keys hold the crawl).
EVEN = "even"
PLAIN = "plain"
SHARD_TAGS = (EVEN, PLAIN)


def hash_slot_of(tag: str) -> int:
    """The hash slot of a key whose hash tag is ``tag`` (Redis's CRC16 XMODEM)."""
    return crc_hqx(tag.encode("utf-8"), 0) % HASH_SLOTS


def tag_in_run(base: str, run: int, runs: int, head: int | None = None) -> str:
    """``base``, or ``base~<n>`` for the first n >= 1, whose slot lies in the
    ``run``-th of ``runs`` equal runs of the slot space (within its first
    ``head`` slots, if given)."""
    if not 0 <= run < runs <= HASH_SLOTS:
        raise ValueError(f"run {run} of {runs}: at most {HASH_SLOTS} runs of the slot space")
    lo, hi = run * HASH_SLOTS // runs, (run + 1) * HASH_SLOTS // runs
    if head is not None:
        hi = min(hi, lo + max(1, head))
    if lo <= hash_slot_of(base) < hi:
        return base
    # CRC16 runs on from the common head: each try hashes a few digits only.
    head = crc_hqx(f"{base}~".encode(), 0)
    n = 1
    while not lo <= crc_hqx(str(n).encode("ascii"), head) % HASH_SLOTS < hi:
        n += 1
    return f"{base}~{n}"


@functools.lru_cache(maxsize=64)
def shard_tags(crawl: str, shards: int, scheme: str = EVEN) -> tuple[str, ...]:
    """The hash tag of each of a crawl's shards: ``<crawl>/<s>`` (plain), or
    that in the first RUN_HEAD slots of the s-th of ``shards`` equal runs
    (even). Even tags cost about max(1,024, shards) CRC16s of a few bytes a
    shard, once a process (cached): 0.4 s at 1,024 shards, 8 s at 4,096 (on a
    loaded 2-core machine)."""
    if scheme == PLAIN:
        return tuple(f"{crawl}/{s}" for s in range(shards))
    if scheme != EVEN:
        raise ValueError(f"shard tags {scheme!r}: must be one of {', '.join(SHARD_TAGS)}")
    if shards > HASH_SLOTS:
        raise ValueError(f"{shards} shards: even tags need at most {HASH_SLOTS} (one slot each)")
    return tuple(tag_in_run(f"{crawl}/{s}", s, shards, RUN_HEAD) for s in range(shards))
