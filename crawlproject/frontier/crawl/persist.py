"""``SCHEDULER_PERSIST = False``: the crawl's keys go once the fleet's crawl has ended.

scrapy-redis flushes its queue and dupefilter whenever one spider closes, so
one worker of several stopping (Ctrl-C, a deploy) empties the queue under the
others. Here the keys are deleted only when both hold:

* the crawl ended for the whole fleet: the worker closes with reason
  ``finished`` after the scheduler decided the crawl was over (the frontier
  empty with nothing in flight anywhere for ``CRAWL_IDLE_CLOSE_SECONDS``, or
  ``max_pages`` reached crawl-wide), not on a shutdown, a failure or in a
  continuous crawl;
* this worker is the last one out: after removing itself from the crawl's
  worker set, no other worker has a heartbeat younger than the lease time (a
  worker that died long ago has no say; its leases expired before the crawl
  could end). Each worker removes itself before it looks, so of workers
  leaving together the last to remove itself sees none left: the keys never
  stay behind because two workers each saw the other.

Deleted: every key of :meth:`CrawlKeys.all_patterns` (frontier shards, seen
set, dedupe index, recrawl schedule, status, the seed list), found with SCAN
(on every master of a cluster) and removed with UNLINK.
"""

from __future__ import annotations

import logging
import time

from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlproject.frontier.store.keys import CrawlKeys

logger = logging.getLogger(__name__)

UNLINK_BATCH = 500


async def workers_alive(redis: Redis, keys: CrawlKeys, lease_ms: int) -> int:
    """Workers of the crawl with a heartbeat within ``lease_ms``."""
    now_ms = int(time.time() * 1000)
    return int(await redis.zcount(keys.workers, now_ms - lease_ms, "+inf"))


async def delete_crawl(redis: Redis, keys: CrawlKeys) -> int:
    """Deletes every key of the crawl; returns how many."""
    deleted = 0
    batch: list[bytes | str] = []
    for pattern in keys.all_patterns():
        async for key in redis.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= UNLINK_BATCH:
                deleted += await _unlink(redis, batch)
                batch = []
    if batch:
        deleted += await _unlink(redis, batch)
    return deleted


async def _unlink(redis: Redis, batch: list[bytes | str]) -> int:
    # One UNLINK of the batch: redis-py's cluster client splits it by hash slot
    # (and sums the replies). Not a pipeline of UNLINKs: a cluster pipeline's
    # unlink is a coroutine that is never queued, and nothing was deleted.
    return int(await redis.unlink(*batch))


async def end_crawl_if_last(redis: Redis, keys: CrawlKeys, lease_ms: int) -> int | None:
    """Deletes the crawl's keys if no other worker is alive (this one has left
    the worker set already); returns how many keys, or None if others remain."""
    if await workers_alive(redis, keys, lease_ms):
        return None
    return await delete_crawl(redis, keys)


async def end_crawl(redis: Redis, keys: CrawlKeys, lease_ms: int) -> None:
    """At a worker's close after the fleet's crawl ended: the last worker out
    deletes the crawl's keys (logged either way; a Redis error is logged, the
    keys stay)."""
    try:
        deleted = await end_crawl_if_last(redis, keys, lease_ms)
    except RedisError as exc:
        logger.warning("SCHEDULER_PERSIST=False: could not delete crawl %r: %s", keys.crawl, exc)
        return
    if deleted is None:
        logger.info(
            "SCHEDULER_PERSIST=False: other workers of crawl %r are still closing; the last "
            "one out deletes its keys",
            keys.crawl,
        )
    else:
        logger.info(
            "SCHEDULER_PERSIST=False: crawl %r ended and this was its last worker: deleted "
            "its %d keys",
            keys.crawl,
            deleted,
        )
