"""Which workers of the fleet can render, and the pages a worker without a
browser gives back to them (docs/rendering.md, "A worker without a browser").

A worker with a browser puts itself in the crawl's ``cp:{C}:renderers`` ZSET
(worker id -> its last heartbeat, unix ms; crawlproject/frontier/store/keys.py)
every ``HEARTBEAT_SECONDS`` and leaves it when its frontier closes; one that
died drops out ``ALIVE_SECONDS`` after its last heartbeat.

A worker without one meets a page that must be rendered (its request asks,
or its template was learned to need it) *before* fetching it: while a worker
with a browser is alive, it hands the URL back to the frontier (released
without contact, its host left alone ``HAND_BACK_HOLD_SECONDS``, the URL at
the head of its host's queue for whichever worker claims it next), at most
``CRAWL_RENDER_MAX_HANDBACKS`` times; after that, or with no such worker in
the fleet, it fetches the page raw (``render/unrendered``). The page is
never fetched twice: a page handed back was not fetched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict

from redis.asyncio import Redis
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0
ALIVE_SECONDS = 30.0  # three heartbeats: a worker that died drops out then
ALIVE_CACHE_SECONDS = 2.0  # how long a worker without a browser trusts a count it read
FORGOTTEN_SECONDS = 3600.0  # a member older than this is deleted (a worker long gone)
# The host is left alone this long after a hand-back: a claim by the worker
# that gave it back, at once, would find it again before any other worker.
HAND_BACK_HOLD_SECONDS = 1.0
HAND_BACKS_KEPT = 10_000  # URLs whose hand-backs a worker counts at once


def _now_ms() -> int:
    return int(time.time() * 1000)


class Renderers:
    """The crawl's workers that can render (``cp:{C}:renderers``)."""

    def __init__(self, redis: Redis, key: str) -> None:
        self.redis = redis
        self.key = key
        self._alive: tuple[float, int] | None = None  # (monotonic until, count)

    async def beat(self, worker: str) -> None:
        now = _now_ms()
        await self.redis.zadd(self.key, {worker: now})
        await self.redis.zremrangebyscore(self.key, 0, now - int(FORGOTTEN_SECONDS * 1000))

    async def leave(self, worker: str) -> None:
        await self.redis.zrem(self.key, worker)

    async def alive(self) -> int:
        """Workers with a browser and a heartbeat within ``ALIVE_SECONDS``
        (read at most once per ``ALIVE_CACHE_SECONDS``)."""
        cached = self._alive
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        since = _now_ms() - int(ALIVE_SECONDS * 1000)
        count = int(await self.redis.zcount(self.key, since, "+inf"))
        self._alive = (time.monotonic() + ALIVE_CACHE_SECONDS, count)
        return count


class Heartbeat:
    """A worker with a browser, in the registry while its frontier is open."""

    def __init__(self, renderers: Renderers, worker: str) -> None:
        self.renderers = renderers
        self.worker = worker
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._said_error = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Asked to stop, not cancelled (a cancellation inside a redis-py call
        may be swallowed), then out of the registry."""
        if self._task is None:
            return
        self._stop.set()
        await self._task
        self._task = None
        try:
            await self.renderers.leave(self.worker)
        except RedisError as exc:  # it drops out ALIVE_SECONDS after its last beat
            logger.debug("Rendering: could not leave the renderers' registry (%s)", exc)

    async def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                await self.renderers.beat(self.worker)
            except RedisError as exc:
                if not self._said_error:
                    self._said_error = True
                    logger.warning("Rendering: could not say this worker renders (%s); "
                                   "trying again every %.0f s", exc, HEARTBEAT_SECONDS)  # fmt: skip
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), HEARTBEAT_SECONDS)


class HandBacks:
    """How often this worker gave each URL back (the last ``HAND_BACKS_KEPT``)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._counts: OrderedDict[str, int] = OrderedDict()

    def may_hand_back(self, url: str) -> bool:
        """True and counted while ``url`` was given back fewer than ``most`` times."""
        count = self._counts.get(url, 0)
        if count >= self.most:
            self._counts.pop(url, None)
            return False
        self._counts[url] = count + 1
        self._counts.move_to_end(url)
        while len(self._counts) > HAND_BACKS_KEPT:
            self._counts.popitem(last=False)
        return True

    def fetched(self, url: str) -> None:
        self._counts.pop(url, None)
