"""A worker's way out: its loops stopped, its unfinished work handed back.

Kept apart from scheduler.py, which wires the parts together; this is the
order in which they are taken down when the spider closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from redis.exceptions import RedisError
from scrapy.statscollectors import StatsCollector

from crawlproject.frontier.claims.claims import ClaimBuffer
from crawlproject.frontier.claims.leases import LeaseBook
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.frontier.store.seen_set import SeenWatch

logger = logging.getLogger(__name__)


async def stop_loops(
    stop: asyncio.Event,
    events: Iterable[asyncio.Event],
    tasks: list[asyncio.Task[None]],
    timeout: float,
) -> None:
    """Asks the loops to end at their next turn and waits for them.

    Cancelling a task in the middle of a redis-py call can leave the call half
    done (and redis-py may swallow the cancellation), so a loop is cancelled
    only when it did not stop within ``timeout`` seconds."""
    stop.set()
    for event in events:
        event.set()
    if not tasks:
        return
    _, stuck = await asyncio.wait(tasks, timeout=timeout)
    for task in stuck:
        logger.warning("Frontier task did not stop in %.0f s; cancelling", timeout)
        task.cancel()


async def hand_back(
    frontier: RedisFrontier,
    worker_id: str,
    leases: LeaseBook,
    claims: ClaimBuffer,
    write_once: Callable[[], Awaitable[None]],
    seen: SeenWatch,
    stats: StatsCollector,
    lease_seconds: float,
) -> None:
    """Writes what is pending and returns unfinished URLs to their queues;
    if Redis fails meanwhile, their leases expire and they come back then."""
    try:
        unfinished = leases.take_all()
        claims.clear()
        await leases.send_releases(frontier)
        await write_once()
        await seen.check(frontier.redis, frontier.keys, force=True)  # final stats
        if unfinished:
            acked, _ = await frontier.ack(unfinished, mode="return")
            stats.inc_value("frontier/returned", acked)
            logger.info("Returned %d unfinished URL(s) to the frontier", acked)
        await frontier.forget_worker(worker_id)
    except RedisError as exc:
        logger.warning(
            "Could not hand unfinished work back (%s): its leases expire within "
            "%.0f s and it returns to the queues then",
            exc,
            lease_seconds,
        )
