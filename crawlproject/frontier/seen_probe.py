"""The seen probe: a worker reads the exact seen set before it adds links.

add.lua's seen test runs in Lua, where every step costs: the link's argument
becomes a Lua string, its bucket and member are computed and formatted, the
SADD goes through the script's command layer. A link already seen needs none
of it. So before an add, the worker asks Redis natively, in one pipeline,
``SISMEMBER`` of each new link's bucket (the bucket computed here, as
_seen.lua computes it, from the shard's table shape as of this worker's last
add: level L and split pointer s, which add.lua returns). A link found there
is seen: in depth order with nothing else to count (no vote, no token shape)
it is dropped here and counted as a seen hit; otherwise it goes to add.lua as
kind ``s`` (seen: the test skipped, the rest done). A link not found goes
through add.lua's test as before, which stays the only writer of the set.

A stale shape is safe. Buckets only split, so an address computed from an
older (L, s) names a bucket that exists, and a member found in bucket b is
the fingerprint itself: b's number holds the 11 low bits a member lacks
(every table level is at least 11). A stale address can only miss, and a
miss costs what the probe did not save, never a URL.

When few links are found (a crawl's early pages, or a worker whose local
cache, admission.py, already drops most repeats), the probe would cost more
than it saves: it then runs on one add in ``PROBE_SAMPLE_EVERY`` only, to
see whether repeats came back.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TypeAlias

from redis.asyncio import Redis

from crawlproject.frontier.keys import CrawlKeys
from crawlproject.frontier.seen import MIN_LEVEL

ByShard: TypeAlias = dict[int, dict[str, list[bytes]]]  # shard -> host -> packed entries
DROPPED = b""  # a dropped link's place while sifting (no packed entry is empty)
# A packed entry (NewEntry.packed): fingerprint (8 bytes), kind, options ("@" +
# 1 pattern, + 2 token shape, + 4 vote), the fields those name, the number.
KIND_NEW = ord("0")
NO_OPTIONS = ord("@")
PATTERN_OPTION = 1
_DOUBLE = struct.Struct(">d")

# Probe while at least this fraction of the links probed are found seen: a
# native SISMEMBER costs about a fifth of what add.lua spends on a seen link
# (bench/frontier_profile.py --callgrind, BENCHMARKS.md).
PROBE_MIN_HIT_FRACTION = 0.2
PROBE_SAMPLE_EVERY = 16  # below it, probe one add in this many


def address(fp: bytes, level: int, split: int) -> int:
    """The bucket of a fingerprint in a table of 2^level + split buckets."""
    x = int.from_bytes(fp[:6], "little")
    a = x & ((1 << level) - 1)
    return x & ((2 << level) - 1) if a < split else a


def member(fp: bytes) -> int:
    """What a bucket stores of a fingerprint: v >> 11 (v: its 8 bytes, little-endian)."""
    return int.from_bytes(fp[:8], "little") >> MIN_LEVEL


def parse_shape(reply: bytes | str | None) -> tuple[int, int] | None:
    """add.lua's ``"L s"`` reply (empty when the call ran no exact test)."""
    if not reply:
        return None
    text = reply.decode() if isinstance(reply, bytes) else reply
    level, _, split = text.partition(" ")
    return int(level), int(split)


@dataclass
class SeenProbe:
    """One worker's view of each shard's table shape, and whether probing pays."""

    shapes: dict[int, tuple[int, int]] = field(default_factory=dict)
    probed: int = 0  # links probed since the rate was last judged
    found: int = 0
    enabled: bool = True  # False: every link goes through add.lua's test (tests compare)
    paying: bool = True
    skipped: int = 0  # adds not probed since the last sample
    # Since the start: links probed, found seen, and of those dropped here.
    probed_total: int = 0
    found_total: int = 0
    dropped_total: int = 0

    def shape(self, shard: int) -> tuple[int, int] | None:
        """The shard's (L, s) as last seen, or None: not known yet (no probe)."""
        return self.shapes.get(shard)

    def learn(self, shard: int, reply: bytes | str | None) -> None:
        shape = parse_shape(reply)
        if shape is not None:
            old = self.shapes.get(shard)
            # Replies of concurrent calls may arrive out of order: keep the larger table.
            if old is None or shape > old:
                self.shapes[shard] = shape

    def due(self) -> bool:
        """Whether this add should probe."""
        if not self.enabled:
            return False
        if self.paying:
            return True
        self.skipped += 1
        if self.skipped >= PROBE_SAMPLE_EVERY:
            self.skipped = 0
            return True
        return False

    def judge(self, probed: int, found: int) -> None:
        """Counts one probe's outcome; judged again every few hundred links."""
        self.probed += probed
        self.found += found
        if self.probed >= 256 or not self.paying:
            self.paying = self.found >= PROBE_MIN_HIT_FRACTION * self.probed
            self.probed = self.found = 0

    async def sift(
        self, redis: Redis, keys: CrawlKeys, by_shard: ByShard, credit_mode: bool
    ) -> dict[int, int]:
        """Probes the new links of ``by_shard`` (shard -> host -> packed
        entries, NewEntry.packed) and rewrites it: a link found seen is
        dropped (counted in the shard's returned hits) or marked kind ``s``.
        Returns shard -> links dropped."""
        if not self.due():
            return {}
        asks: list[tuple[list[bytes], int]] = []  # (its host's list, its index there)
        pipe = redis.pipeline(transaction=False)
        for shard, hosts in by_shard.items():
            shape = self.shapes.get(shard)
            if shape is None:
                continue
            for packed in hosts.values():
                for i, p in enumerate(packed):
                    if p[8] != KIND_NEW:  # dont_filter, or no URL (credit, vote)
                        continue
                    pipe.sismember(keys.seen_bucket(shard, address(p, *shape)), str(member(p)))
                    asks.append((packed, i))
        if not asks:
            return {}
        found = await pipe.execute()
        hits = drops = 0
        for (packed, i), is_seen in zip(asks, found, strict=True):
            if not is_seen:
                continue
            hits += 1
            p = packed[i]
            # Depth order asks nothing more of a seen link without a vote or a
            # token shape (add.lua's common case); AOPIC gives it its credit.
            if p[9] & ~PATTERN_OPTION == NO_OPTIONS and not (credit_mode and number(p) > 0):
                packed[i] = DROPPED
                drops += 1
            else:
                packed[i] = p[:8] + b"s" + p[9:]
        dropped: dict[int, int] = {}
        for shard, hosts in by_shard.items() if drops else ():
            for host in list(hosts):
                kept = [p for p in hosts[host] if p]
                if len(kept) < len(hosts[host]):
                    dropped[shard] = dropped.get(shard, 0) + len(hosts[host]) - len(kept)
                    if kept:
                        hosts[host] = kept
                    else:
                        del hosts[host]
        self.judge(len(asks), hits)
        self.probed_total += len(asks)
        self.found_total += hits
        self.dropped_total += sum(dropped.values())
        return dropped


def number(packed: bytes) -> float:
    """A packed entry's number (its score, or AOPIC credit), after its options' fields."""
    opt = packed[9]
    at = 10 + 8 * (opt & 1) + 8 * (opt >> 1 & 1) + 4 * (opt >> 2 & 1)
    return float(_DOUBLE.unpack_from(packed, at)[0])
