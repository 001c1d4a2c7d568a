"""Starting a crawl over: ``SCHEDULER_FLUSH_ON_START = True`` (scrapy-redis's
setting, with its meaning) and ``crawlproject reset --crawl NAME`` share the
rule here.

A crawl's keys are deleted (persist.py's :func:`delete_crawl`: every key of the
crawl, every shard, the seen set, the duplicate index, robots and recrawl
state, the seed list) only while no worker of the crawl is alive: a worker
whose frontier vanished under it would take a half-deleted crawl for a new one.
scrapy-redis flushes whatever runs; here the start (or the command) is refused
in one line instead.

A worker flushing at its start heartbeats first and then counts the others,
so of two workers started together with the setting, each sees the other and
neither deletes the crawl the other has begun.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from redis.asyncio import Redis
from scrapy.settings import BaseSettings

from crawlproject.frontier.crawl.persist import delete_crawl, workers_alive
from crawlproject.frontier.store.keys import CrawlKeys

if TYPE_CHECKING:
    from crawlproject.frontier.crawl.crawl_redis import CrawlRedis

logger = logging.getLogger("crawlproject.frontier.scheduler")  # where the start's lines are

FLUSH_SETTING = "SCHEDULER_FLUSH_ON_START"


class StartRefused(ValueError):
    """The worker must not start (one line: what and how to fix it)."""


def workers_line(crawl: str, alive: int) -> str:
    """The one line that says a crawl cannot be deleted now, and why."""
    return (
        f"{alive} worker(s) of crawl {crawl!r} are alive (a heartbeat within the lease "
        "time): stop them first (Ctrl-C, SIGTERM), or wait for their crawl to end"
    )


async def other_workers(redis: Redis, keys: CrawlKeys, lease_ms: int, worker_id: str) -> int:
    """Workers of the crawl alive besides ``worker_id`` (counted with its own
    heartbeat written first: see the module docstring)."""
    now_ms = _now_ms()
    await redis.zadd(keys.workers, {worker_id: now_ms})
    return max(0, await workers_alive(redis, keys, lease_ms) - 1)


def _now_ms() -> int:
    return int(time.time() * 1000)  # as RedisFrontier.heartbeat writes it


async def flush_on_start(
    shared: CrawlRedis, settings: BaseSettings, lease_ms: int, worker_id: str
) -> None:
    """With ``SCHEDULER_FLUSH_ON_START`` true: deletes the crawl's keys before
    the frontier opens, or raises :class:`StartRefused` while other workers of
    the crawl are alive (this worker's heartbeat taken back)."""
    if not settings.getbool(FLUSH_SETTING):
        return
    redis, keys = shared.redis, shared.keys
    alive = await other_workers(redis, keys, lease_ms, worker_id)
    if alive:
        await redis.zrem(keys.workers, worker_id)  # this worker never started
        raise StartRefused(
            f"{FLUSH_SETTING}=True would delete crawl {keys.crawl!r} under its workers: "
            + workers_line(keys.crawl, alive)
            + "; or drop the setting to join them"
        )
    deleted = await delete_crawl(redis, keys)
    await redis.zadd(keys.workers, {worker_id: _now_ms()})  # still first in
    logger.info(
        "%s=True: crawl %r started over (%d key(s) deleted: its queues, seen URLs, "
        "duplicate index, robots and recrawl state, seed list)",
        FLUSH_SETTING,
        keys.crawl,
        deleted,
    )
