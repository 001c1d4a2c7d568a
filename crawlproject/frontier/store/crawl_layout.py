"""A crawl's fixed layout (``meta`` in keys.py): recorded by its first worker,
checked by every later one, so no worker misreads another's queues.

Called by :meth:`crawlproject.frontier.store.redis_frontier.RedisFrontier.prepare`.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from crawlproject.frontier.store.hash_slots import EVEN, PLAIN, SHARD_TAGS
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import FrontierMismatch
from crawlproject.frontier.store.script_replies import reply_text
from crawlproject.frontier.store.seen_set import SeenFilter, prepare_seen, refuse_old_layout

# Host queues in priority bands (keys.py), requests in codec.py's compact form,
# band masks, due lists, a small host's bands in one list (_queue.lua), its band
# markers in decimal and stored URLs without the "/" after the key (codec.py).
# "bands3" (markers byte 255 + band, the "/" kept): read by this version, which
# reads both forms, and upgraded by the first worker of this version to join it
# so that a bands3 worker started later is refused (it would misread the new
# forms; one already running is not stopped: upgrade a fleet whole). Older
# crawls, refused: "bands2" (band lists only: a worker of that version would
# misread a small host's list), "bands1" (JSON requests, band strings, a due
# ZSET), and before it none (one list per host queue).
QUEUE_LAYOUT = "bands4"
UPGRADED_LAYOUTS = frozenset({"bands3"})

# Shards of a new crawl when CRAWL_FRONTIER_SHARDS is not set: one hash tag
# each, so that a crawl spreads over the masters a cluster grows to and a moved
# slot moves a small part of it (claims.py keeps a claim's cost flat in the
# count). Not more: a shard's fixed cost is its seen set's first 2^11 buckets
# (about 160 kB once it holds 2^18 URLs), 0.16 B per URL each at 1M URLs
# (bench/frontier_memory.py: 9.4 B per seen URL with 4 shards, 11.3 with 16,
# 19.0 with 64, past its 16 B target).
NEW_CRAWL_SHARDS = 32


async def crawl_shards(redis: Redis, keys: CrawlKeys, wanted: int | None, adopt: bool) -> int:
    """The crawl's shard count (crawl_layout's)."""
    return (await crawl_layout(redis, keys, wanted, adopt))[0]


async def crawl_layout(
    redis: Redis, keys: CrawlKeys, wanted: int | None, adopt: bool
) -> tuple[int, str]:
    """The crawl's shard count and tag scheme (hash_slots.py): the ones it was
    created with (``meta``), or for a new crawl ``wanted``
    (CRAWL_FRONTIER_SHARDS), else NEW_CRAWL_SHARDS, and even tags. A worker
    that set another count is refused (FrontierMismatch, one line) unless
    ``adopt`` (a command reads the crawl as it is)."""
    # One read: ``shard_tags`` is written before ``shards`` (prepare_layout),
    # so a meta with ``shards`` and no ``shard_tags`` is an older crawl's.
    raw_shards, raw_tags = await redis.hmget(keys.meta, ["shards", "shard_tags"])
    stored = reply_text(raw_shards or b"")
    if not stored:
        return (NEW_CRAWL_SHARDS if wanted is None else wanted), EVEN
    tags = reply_text(raw_tags or b"") or PLAIN
    if tags not in SHARD_TAGS:
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} has shard_tags={tags!r}, made by a newer version; "
            "this one cannot name its shards"
        )
    if not stored.isdigit() or int(stored) < 1:
        raise FrontierMismatch(f"crawl {keys.crawl!r} has an unreadable shard count {stored!r}")
    if wanted is not None and wanted != int(stored) and not adopt:
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} was created with CRAWL_FRONTIER_SHARDS={stored}; this "
            f"worker sets {wanted}. Leave CRAWL_FRONTIER_SHARDS unset (a worker takes the "
            "crawl's), or use another crawl name."
        )
    return int(stored), tags


async def prepare_layout(
    redis: Redis, keys: CrawlKeys, priority_mode: str, seen: SeenFilter
) -> None:
    """Records the crawl's fixed layout, or checks it against this worker's."""
    fields = {
        # First: older versions wrote "shards" and no layout, and another
        # worker preparing the same new crawl at this moment must never be
        # seen with "shards" but no layout yet (one HSETNX after another).
        "queue_layout": QUEUE_LAYOUT,
        # Before "shards" too: a meta with "shards" and no "shard_tags" is an
        # older crawl's (plain tags), so a reader between two HSETNXs of a
        # new crawl must not see "shards" yet.
        "shard_tags": keys.tags,
        "shards": str(keys.shards),
        # Scores of the two modes mean different things: never mixed in a crawl.
        "priority_mode": priority_mode,
    }
    before = await redis.hgetall(keys.meta)
    refuse_old_layout(keys.crawl, before)
    if b"shards" in before and b"queue_layout" not in before:
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} was created by an older version (one list per "
            "host queue); use another crawl name"
        )
    old_layout = reply_text(before.get(b"queue_layout", b""))
    if old_layout in UPGRADED_LAYOUTS:
        await redis.hset(keys.meta, "queue_layout", QUEUE_LAYOUT)
    elif old_layout and old_layout != QUEUE_LAYOUT:
        # Its queued requests and host states are in another form (keys.py):
        # read by this version, they would be misread, never silently.
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} was created by an older version (queue layout "
            f"{old_layout}; this version stores {QUEUE_LAYOUT}); this version cannot read "
            "its queues. Finish the crawl with the version that created it, or start it "
            "again under another CRAWL_NAME."
        )
    if b"shards" in before and b"shard_tags" not in before:
        # An older crawl: its keys carry plain tags, and its meta never gets
        # the field (a worker naming them otherwise would crawl other keys).
        if keys.tags != PLAIN:
            raise FrontierMismatch(
                f"crawl {keys.crawl!r} was created with plain shard tags; this worker "
                f"names its shards with {keys.tags} tags (open it with FrontierConfig.open_keys)"
            )
        del fields["shard_tags"]
    elif keys.tags == PLAIN and b"shards" not in before:
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} is new: plain shard tags are an older crawl's only"
        )
    await redis.hsetnx(keys.meta, "created", str(int(time.time())))
    for name, value in fields.items():
        await redis.hsetnx(keys.meta, name, value)
    stored = await redis.hgetall(keys.meta)
    for name, value in fields.items():
        have = reply_text(stored.get(name.encode(), b""))
        if have != value:
            raise FrontierMismatch(
                f"crawl {keys.crawl!r} was created with {name}={have}; this worker "
                f"has {value}. Use the same settings, or another crawl name."
            )
    await prepare_seen(redis, keys, seen)
    # The scripts read the mode from each shard (it is in their hash slot).
    for shard in range(keys.shards):
        await redis.set(keys.priority_mode(shard), priority_mode)
