"""Shared fixtures: a fresh real Redis per test, and loopback test webs."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# tests/ has no __init__.py, so plain `pytest` puts tests/ (not the repo root)
# on sys.path; the repo root makes `testkit` and the project importable.
REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from redis.asyncio import Redis  # noqa: E402

from crawlproject.frontier.store.keys import CrawlKeys  # noqa: E402
from crawlproject.frontier.store.redis_frontier import RedisFrontier  # noqa: E402
from testkit.redis_server import RedisServer  # noqa: E402
from testkit.s3_server import TEST_BUCKET, MotoServer  # noqa: E402
from testkit.testweb import TestWeb  # noqa: E402


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh redis-server for this test (no persistence); starts in ~20 ms."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def redis_server_factory() -> Iterator[Callable[..., RedisServer]]:
    """``make(appendonly=True)`` etc.: servers with options, stopped at teardown."""
    servers: list[RedisServer] = []

    def make(**kwargs: Any) -> RedisServer:
        servers.append(RedisServer(**kwargs).start())
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def testweb_factory() -> Iterator[Callable[..., TestWeb]]:
    """``make(hosts=3, pages=10, latency_ms=(5, 20))``: an in-thread web, stopped at teardown."""
    webs: list[TestWeb] = []

    def make(**kwargs: Any) -> TestWeb:
        webs.append(TestWeb(**kwargs).start())
        return webs[-1]

    yield make
    for web in webs:
        web.stop()


MakeFrontier = Callable[..., Awaitable[RedisFrontier]]


@pytest.fixture
async def make_frontier(redis_url: str) -> AsyncIterator[MakeFrontier]:
    """RedisFrontier clients of a fresh crawl on the test's Redis (prepared);
    keyword options beyond the layout go to RedisFrontier."""
    clients: list[Redis] = []

    async def make(
        crawl: str = "t", shards: int = 2, delay_ms: int = 200, conc: int = 1,
        lease_ms: int = 1000, **options: Any,
    ) -> RedisFrontier:  # fmt: skip
        redis = Redis.from_url(redis_url)
        clients.append(redis)
        keys = CrawlKeys(crawl, shards)
        frontier = RedisFrontier(redis, keys, delay_ms, conc, lease_ms, **options)
        await frontier.prepare()
        return frontier

    yield make
    for c in clients:
        await c.aclose()


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    """A real moto_server (S3 over HTTP) with the bucket TEST_BUCKET."""
    with MotoServer() as server:
        server.client().create_bucket(Bucket=TEST_BUCKET)
        yield server


# The longest test files (minutes each, measured by --durations on 2 cores),
# longest first: ./run tests hands files to its 3 processes in this order
# (pytest-xdist --dist loadfile --no-loadscope-reorder; xdist's own order, by
# number of tests, started the one-test files of minutes, the trap crawls' and
# the failover's, last: the run's tail). xdist gives a process its next file
# once it has at most 2 tests left, so a one-test file takes the next one at
# its start: trap_families (1 test) takes crawl_traps, and the two crawls of
# traps run one after the other, not at once (at once, with 4 processes, a
# crawl-trap test overran its bound: CI at 1291e18). CI (5ebf856 and before):
# seen_set ~210-230 s, trap_families 150-220 (2,000 pages then), store_faults
# ~150, crawl_traps ~160, redis_failover 90-150, stable_ids 70-180,
# dedupe_index ~110, your_spider_your_sites 390-466 (12,001 pages then).
LONGEST_FILES = (
    "test_seen_set.py",
    "test_trap_families.py",
    "test_store_faults.py",
    "test_crawl_traps.py",
    "test_redis_failover.py",
    "test_stable_ids.py",
    "test_dedupe_index.py",
    "test_your_spider_your_sites.py",
    "test_first_spider.py",
    "test_render.py",
    "test_crawl_options.py",
    "test_unanswering_hosts.py",
    "test_render_browser.py",
    "test_render_fleet.py",
    "test_scrapy_own_settings.py",
    "test_address_politeness.py",
    "test_dead_list.py",
    "test_crawl_fleet.py",
    "test_recrawl.py",
    "test_redis_cluster.py",
    "test_embedded_and_seeding.py",
    "test_dedupe_fleet.py",
    "test_budget_crawl.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(LONGEST_FILES)}
    # Stable: a file's tests keep their order (module fixtures run once).
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))
