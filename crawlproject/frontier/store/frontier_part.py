"""What each part of :class:`crawlproject.frontier.store.redis_frontier.RedisFrontier`
(budgets.py's OverBudget, parking.py's ParkedUrls) finds on it: the connection,
the keys, the default politeness and the script runner, all supplied by
RedisFrontier. Declared once here, not in each part."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from crawlproject.frontier.store.keys import CrawlKeys


class FrontierPart:
    redis: Redis
    keys: CrawlKeys
    default_delay_ms: int
    default_concurrency: int

    async def _run(self, name: str, shard: int, *args: Any) -> Any:
        raise NotImplementedError  # RedisFrontier's: one script run on a shard
