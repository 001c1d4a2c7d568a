"""The one-tag duplicate index, read back: the only code left that knows its
layout (``crawlproject dedupe migrate`` reads it, crawlproject/dedupe/migrate.py).

Before issue 42 a crawl's index could sit on one hash tag ``cp:{C/dd}:``
(``CRAWL_DEDUPE_PARTS=0``, and every index made before 2026-11-28: a ``cfg``
with ``k`` and ``b`` but no ``parts``), grown by one Lua script, dedupe.lua
(removed; its last version is 7bca5c2's). Its keys:

* ``x:<a>``: the exact index, bucket ``a`` (hex): 8-byte entries, SHA-1
  bytes 3-10. Its levels start at 16 and a bucket is x mod 2^L, with x = SHA-1
  bytes 1-2 (b1 x 256 + b2) + 2^16 x bytes 3-6, so ``a``'s low 16 bits are
  bytes 1-2: bucket and entry give back the first 80 bits whatever the level.
* ``s:<t>:<a>``: near table t's buckets: 8-byte SimHashes, big-endian. Every
  new page with a SimHash went into every table in the same script run, so
  table 0 alone holds them all.
* ``o:<bb>``: originals: page id bytes 3-8 -> URL, ``bb`` the id's bytes 1-2
  (4 hex digits); id = the SimHash, or without one SHA-1 bytes 1-8.
* ``streak`` (host -> duplicates in a row) and ``n`` (``new``, ``exact``,
  ``near``).

Both layouts keep a page's SHA-1 and its SimHash apart, never as a pair
(neither needs the pair to judge a page), so nothing is lost in reading them.
``cfg`` (the same key in both layouts) and ``soft404`` (one hash in every
layout) are not the one-tag index's own and stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.asyncio import Redis

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.script_replies import reply_text

ENTRY = 8
# The one-tag index's growth state in ``cfg`` (a spread index keeps its own per part).
GROWTH_FIELDS = ("xL", "xs", "xn", "nL", "ns", "nn")
SCAN_COUNT = 1000


@dataclass
class OneTagIndex:
    """What a one-tag index holds."""

    digests: list[bytes] = field(default_factory=list)  # SHA-1 bytes 1-10 of each new page
    simhashes: list[int] = field(default_factory=list)  # of each new page with one
    originals: dict[bytes, str] = field(default_factory=dict)  # page id (8 bytes) -> URL
    streaks: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)


def is_one_tag(cfg: dict[str, str]) -> bool:
    """A ``cfg`` (fields as text) of a one-tag index of the growing layout."""
    return "k" in cfg and "b" in cfg and "parts" not in cfg


async def one_tag_keys(redis: Redis, keys: CrawlKeys) -> list[bytes]:
    """Every key of the crawl's one-tag index but ``cfg`` and ``soft404``."""
    keep = {keys.dedupe_config.encode(), keys.soft404.encode()}
    found = []
    async for key in redis.scan_iter(match=keys.dedupe_prefix + "*", count=SCAN_COUNT):
        name = key if isinstance(key, bytes) else key.encode()
        if name not in keep:
            found.append(name)
    return found


def _raw(value: bytes | str | None) -> bytes:
    return value.encode() if isinstance(value, str) else value or b""


def _entries(value: bytes | str | None) -> list[bytes]:
    value = _raw(value)
    return [value[at : at + ENTRY] for at in range(0, len(value) - ENTRY + 1, ENTRY)]


async def read_one_tag(redis: Redis, keys: CrawlKeys) -> OneTagIndex:
    """The crawl's one-tag index, read with SCAN and GET/HGETALL."""
    prefix = keys.dedupe_prefix.encode()
    index = OneTagIndex()
    for name in await one_tag_keys(redis, keys):
        kind, _, rest = name[len(prefix) :].partition(b":")
        if kind == b"x":
            head = (int(rest, 16) & 0xFFFF).to_bytes(2, "big")  # SHA-1 bytes 1-2
            index.digests += [head + entry for entry in _entries(await redis.get(name))]
        elif kind == b"s" and rest.startswith(b"0:"):
            index.simhashes += [int.from_bytes(e, "big") for e in _entries(await redis.get(name))]
        elif kind == b"o":
            head = bytes.fromhex(rest.decode())
            for fid, url in (await redis.hgetall(name)).items():
                index.originals[head + _raw(fid)] = reply_text(url)
        elif kind == b"streak":
            index.streaks = {reply_text(h): int(v) for h, v in (await redis.hgetall(name)).items()}
        elif kind == b"n":
            index.counters = {reply_text(c): int(v) for c, v in (await redis.hgetall(name)).items()}
    index.digests.sort()
    index.simhashes.sort()
    return index
