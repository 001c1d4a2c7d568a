"""Claim order of AOPIC against depth on the frontier test's synthetic graph.

    .venv/bin/python bench/aopic_order.py

The simulation of tests/test_frontier_priority.py (30 hosts x 20 pages whose home
pages all link to one page of a 31st host, beside a bot trap minting 5 fresh URLs
per page; one claim at a time, links added with the page's credit share or
depth) run once per policy on a private redis-server, printing where the page
linked from every host came, and how many claims the trap got.
"""

from __future__ import annotations

import asyncio

from benchlib import RedisServer
from redis.asyncio import Redis

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from testkit.frontier_sim import SyntheticWeb, simulated_crawl


async def run(url: str) -> None:
    pages = SyntheticWeb().pages()
    claims = pages + pages // 10
    redis = Redis.from_url(url)
    for mode, name in (("credit", "aopic"), ("score", "depth")):
        keys = CrawlKeys(f"order-{name}", 1)
        f = RedisFrontier(redis, keys, 0, 1, 10_000, priority_mode=mode)
        await f.prepare()
        order = await simulated_crawl(f, claims)
        trap = [i for i, u in enumerate(order) if u.startswith("http://trap.test/")]
        normal = [i for i, u in enumerate(order) if not u.startswith("http://trap.test/")]
        popular = order.index(SyntheticWeb.POPULAR) if SyntheticWeb.POPULAR in order else None
        before = sum(1 for i in trap if normal and i < normal[-1])
        print(
            f"{name:5}: {len(order)} claims; page linked from every host at claim {popular}; "
            f"trap {len(trap)} claims ({before} before the last other page); "
            f"other pages {len(normal)} of {pages}"
        )
    await redis.aclose()


def main() -> None:
    server = RedisServer()
    try:
        asyncio.run(run(server.url))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
