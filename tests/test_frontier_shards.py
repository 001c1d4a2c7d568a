"""Many fine-grained shards (CRAWL_FRONTIER_SHARDS unset: the crawl's own
count, crawlproject/frontier/store/crawl_layout.py NEW_CRAWL_SHARDS for a new crawl):
a crawl made with 4 shards goes on under the default, and another explicit
count is refused with one line. Claims over many shards:
tests/test_frontier_shards_claims.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from scrapy.settings import Settings

from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS, crawl_shards
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import FrontierMismatch
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, page_counts, politeness_report

DELAY = 0.2
FAST = {"CRAWL_HOST_DELAY": DELAY, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}


# -- the setting ---------------------------------------------------------------------


def config_of(**settings: object) -> FrontierConfig:
    return FrontierConfig.from_settings(Settings({"REDIS_URL": "redis://127.0.0.1:1", **settings}))


def test_unset_means_the_crawls_own_count_and_a_bad_count_is_refused() -> None:
    assert config_of().shards is None
    assert config_of().crawl_keys("web").shards == NEW_CRAWL_SHARDS
    assert config_of(CRAWL_FRONTIER_SHARDS="16").shards == 16
    assert config_of(CRAWL_FRONTIER_SHARDS=256).crawl_keys("web").shards == 256
    for bad in ("0", "-4", "many", "4.5", 2.0):
        with pytest.raises(ConfigError, match="CRAWL_FRONTIER_SHARDS must be a whole number"):
            config_of(CRAWL_FRONTIER_SHARDS=bad)


async def test_a_new_crawl_takes_the_default_and_an_old_one_its_own(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    try:
        unset, sixteen = config_of(REDIS_URL=redis_url), config_of(CRAWL_FRONTIER_SHARDS=16)
        assert (await unset.open_keys(redis, "new")).shards == NEW_CRAWL_SHARDS
        assert (await sixteen.open_keys(redis, "new")).shards == 16  # nothing made yet
        old = RedisFrontier(redis, CrawlKeys("old", 4), 0, 1, 30_000)
        await old.prepare()  # a crawl made with 4 shards (the default before)
        assert (await unset.open_keys(redis, "old")).shards == 4
        with pytest.raises(FrontierMismatch) as refused:
            await sixteen.open_keys(redis, "old")
        line = str(refused.value)
        assert "\n" not in line
        assert "created with CRAWL_FRONTIER_SHARDS=4; this worker sets 16" in line
        # A command reads the crawl as it is, whatever its settings say.
        assert (await sixteen.open_keys(redis, "old", adopt=True)).shards == 4
        await redis.hset(CrawlKeys("odd", 1).meta, "shards", "four")
        with pytest.raises(FrontierMismatch, match="unreadable shard count"):
            await crawl_shards(redis, CrawlKeys("odd", 1), None, adopt=False)
    finally:
        await redis.aclose()


def test_a_crawl_made_with_4_shards_is_finished_by_a_worker_with_the_default(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """The first worker (4 shards, the old default) stops after 10 pages; a
    worker with CRAWL_FRONTIER_SHARDS unset takes the crawl's 4 and finishes it:
    every page fetched once, the 4 shards' keys only; a command with the
    default reads it too."""
    web = testweb_factory(hosts=6, pages=8, latency_ms=(2, 5), links=3, cross_links=1)
    first = start_worker(
        REPO_ROOT, redis_server.url, "resume", web.seeds,
        {**FAST, "CRAWL_FRONTIER_SHARDS": 4}, tmp_path / "first.log",
        extra_args=["-a", "max_pages=10"],
    )  # fmt: skip
    assert wait_all([first], timeout=120) == [0]
    after_first = sum(page_counts(web.log).values())
    assert 0 < after_first < len(web.expected_urls)
    second = start_worker(
        REPO_ROOT, redis_server.url, "resume", web.seeds, FAST, tmp_path / "second.log"
    )
    assert wait_all([second], timeout=120) == [0]
    counts = page_counts(web.log)
    assert set(counts) == web.expected_urls
    assert all(n == 1 for n in counts.values()), counts
    assert stats_of(second.log_path)["frontier/acks"] >= len(web.expected_urls) - after_first
    for host, p in politeness_report(web.log, DELAY).items():
        assert p.max_in_flight <= 1 and p.idle_below_delay == 0, (host, p)
    client = SyncRedis.from_url(redis_server.url)
    keys = CrawlKeys("resume", 4)  # a new crawl's (even) tags, its 4 shards
    assert client.hget(keys.meta, "shards") == b"4"
    prefixes = {k.split(b"}")[0] + b"}:" for k in client.keys(b"cp:{resume/*")}
    shard_prefixes = {p for p in prefixes if not p.startswith(b"cp:{resume/dd")}
    assert shard_prefixes == {p.encode() for p in keys.shard_prefixes}  # the 4 shards only
    cli = subprocess.run(
        [sys.executable, "-m", "crawlproject", "--crawl", "resume", "--redis-url",
         redis_server.url, "counts"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    counts_json = json.loads(cli.stdout)
    assert counts_json["done"] == len(web.expected_urls) and counts_json["queued"] == 0
