"""Small helpers of the scheduler's background loops: waiting on an event
without swallowing cancellation, and bounded backoff on Redis errors."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from crawlproject.frontier.connection.outage import give_up, leave, outage_started
from crawlproject.redis_calls import OUTAGE_ERRORS
from crawlproject.redis_calls import Backoff as RedisBackoff

if TYPE_CHECKING:
    from scrapy.core.engine import ExecutionEngine

logger = logging.getLogger(__name__)

REDIS_RETRY_MAX_SECONDS = 5.0


class Backoff:
    """Bounded exponential backoff for Redis errors: workers wait, not die;
    errors without a success for ``outage_seconds`` end the process
    (outage.py ``give_up``: one line, exit status 1)."""

    def __init__(self, stop: asyncio.Event, outage_seconds: float) -> None:
        self.stop = stop
        self.outage_seconds = outage_seconds
        self.waits = RedisBackoff(outage_seconds, most=REDIS_RETRY_MAX_SECONDS)

    def reset(self) -> None:
        self.waits.reset()

    async def sleep(self, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        # A client that rode the outage through already says since when.
        if not self.waits.failed(now, began=outage_started(exc, now)):
            give_up(what, exc, self.outage_seconds)
        delay = self.waits.delay(now)
        logger.warning("Redis error in frontier %s (%s); retrying in %.2f s", what, exc, delay)
        await wait_event(self.stop, delay)


def close_or_exit(engine: ExecutionEngine, reason: str, seconds: float) -> asyncio.Future[None]:
    """Closes the spider from a task of its own; if the close has not ended
    within ``seconds`` (requests in flight that wait on Redis, a close step
    that waits on it), one line and exit status 1 at once, never a spider
    left closing."""

    async def close() -> None:
        closing = asyncio.ensure_future(engine.close_spider_async(reason=reason))
        done, _ = await asyncio.wait([closing], timeout=seconds)
        if not done:
            leave(f"the spider did not close within {seconds:.0f} s ({reason})")

    return asyncio.ensure_future(close())


async def wait_or_leave(step: Awaitable[None], seconds: float) -> None:
    """``step`` (a Redis step of the way out), given up after ``seconds``:
    what it did not hand back comes back when its leases expire."""
    try:
        await asyncio.wait_for(step, timeout=seconds)
    except TimeoutError:
        logger.warning("Redis did not answer in %.0f s on the way out; leases expire", seconds)


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
    outage_seconds: float,
) -> None:
    """Runs ``once`` when ``event`` is set or every interval, until ``stop``."""
    backoff = Backoff(stop, outage_seconds)
    while not stop.is_set():
        await wait_event(event, interval_seconds)
        event.clear()
        try:
            await once()
        except OUTAGE_ERRORS as exc:
            await backoff.sleep(what, exc)
            continue
        backoff.reset()
