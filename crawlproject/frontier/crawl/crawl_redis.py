"""The crawl's Redis, owned once per worker process.

:class:`CrawlRedis` holds the connection (to ``REDIS_URL``, or to the embedded
Redis of ``CRAWL_DATA_DIR``), the crawl's :class:`CrawlKeys` and this worker's
id. The scheduler makes it when the spider opens and closes it last; every
component that keeps state in the crawl's Redis (robots store, dedupe index,
DNS park, status reporter, recrawl store) takes it from
``FrontierScheduler.crawl_redis`` instead of reaching into the frontier.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from crawlproject.frontier.connection.embedded import WORKER_CLIENT_PREFIX, EmbeddedRedis
from crawlproject.frontier.connection.outage import (
    is_setup_error,
    outage_started,
    say_start_wait,
    start_bound_of,
)
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.host_keys import adopt_host_keys
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.recrawl.store import RecrawlStore

logger = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 0.5  # at start, doubled after each failed attempt


def new_worker_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(slots=True)
class CrawlRedis:
    redis: Redis
    keys: CrawlKeys
    worker_id: str
    embedded: EmbeddedRedis | None = field(default=None)
    _recrawl: RecrawlStore | None = field(default=None, repr=False)

    def recrawl_store(self) -> RecrawlStore:
        """The crawl's recrawl schedule (same Redis, same shards)."""
        if self._recrawl is None:
            self._recrawl = RecrawlStore(self.redis, self.keys)
        return self._recrawl

    @classmethod
    async def connect(
        cls, config: FrontierConfig, crawl: str, worker_id: str, outage_seconds: float | None = None
    ) -> CrawlRedis:
        """Connects (starting the embedded Redis if it is the crawl's and not
        running yet); connections are named after the worker. A cluster
        client rides through a changing cluster for ``outage_seconds``."""
        name = WORKER_CLIENT_PREFIX + worker_id
        keys = config.crawl_keys(crawl)
        if config.redis_url is None:
            embedded = EmbeddedRedis(config.data_dir)
            return cls(await embedded.connect(client_name=name), keys, worker_id, embedded)
        client = redis_client(config.redis_url, client_name=name, outage_seconds=outage_seconds)
        return cls(client, keys, worker_id)

    async def close(self) -> bool:
        """Closes the connection; True if this worker was the last one out of
        the embedded Redis (which is then saved and stopped)."""
        if self.embedded is None:
            await self.redis.aclose()
            return False
        return await self.embedded.leave(self.redis, self.worker_id)


async def open_frontier(shared: CrawlRedis, c: FrontierConfig, priority_mode: str) -> RedisFrontier:
    """The crawl's frontier on ``shared``, over the crawl's own shards
    (``shared.keys`` made again with its count), its scripts loaded and its
    layout checked, the host overrides set. A Redis not reachable yet is
    waited for once, up to the client's start bound (outage.py START_SECONDS,
    at most CRAWL_REDIS_OUTAGE_SECONDS), and said in one line: a refused
    connection is waited out by the client itself, a connection dropped
    mid-call (a Redis still starting) here."""
    started: float | None = None
    delay = FIRST_RETRY_SECONDS
    while True:
        try:
            shared.keys = await c.open_keys(shared.redis, shared.keys.crawl)
            frontier = RedisFrontier(
                shared.redis,
                shared.keys,
                default_delay_ms=c.host_delay_ms,
                default_concurrency=c.host_concurrency,
                lease_ms=c.lease_ms,
                adaptive=c.adaptive,
                priority_mode=priority_mode,
                aopic_tax=c.aopic_tax,
                host_url_cap=c.max_pages_per_host,
                pattern_url_cap=c.max_urls_per_pattern,
                max_reclaims=c.max_reclaims,
                budget=c.budget,
                seen=c.seen,
            )
            await adopt_host_keys(shared.redis, shared.keys, c.politeness_key)
            await frontier.prepare()
            break
        except RedisConnectionError as exc:
            # A TLS or certificate-file error is the URL's, not a Redis
            # still starting: say so once, at once.
            if is_setup_error(exc, c.redis_url or ""):
                raise
            now = time.monotonic()
            started = outage_started(exc, now) if started is None else started
            exc.outage_started = started  # type: ignore[attr-defined]  # the line says how long
            bound = start_bound_of(shared.redis)
            if now - started >= bound:
                raise
            say_start_wait(shared.redis, exc)
            await asyncio.sleep(min(delay, started + bound - now))
            delay *= 2
    for host, o in c.host_overrides.items():
        delay_ms = None if o.delay_seconds is None else round(o.delay_seconds * 1000)
        await frontier.set_host_config(host, delay_ms, o.concurrency)
    return frontier
