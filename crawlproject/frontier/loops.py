"""Small helpers of the scheduler's background loops: waiting on an event
without swallowing cancellation, and bounded backoff on Redis errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

REDIS_RETRY_MAX_SECONDS = 5.0


class Backoff:
    """Bounded exponential backoff for Redis errors: workers wait, not die."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.delay = 0.05

    def reset(self) -> None:
        self.delay = 0.05

    async def sleep(self, what: str, exc: Exception) -> None:
        logger.warning("Redis error in frontier %s (%s); retrying in %.2f s", what, exc, self.delay)
        await wait_event(self.stop, self.delay)
        self.delay = min(self.delay * 2, REDIS_RETRY_MAX_SECONDS)


async def wait_event(event: asyncio.Event, timeout: float) -> None:
    """Until ``event`` is set or ``timeout`` passes; cancellation always propagates
    (``asyncio.wait_for`` can swallow it in Python 3.11 when both race)."""
    if event.is_set():
        return
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait([waiter], timeout=timeout)
    finally:
        waiter.cancel()


async def each_turn(
    stop: asyncio.Event,
    what: str,
    once: Callable[[], Awaitable[None]],
    event: asyncio.Event,
    interval_seconds: float,
) -> None:
    """Runs ``once`` when ``event`` is set or every interval, until ``stop``."""
    backoff = Backoff(stop)
    while not stop.is_set():
        await wait_event(event, interval_seconds)
        event.clear()
        try:
            await once()
        except RedisError as exc:
            await backoff.sleep(what, exc)
            continue
        backoff.reset()
