"""A SIGTERM while the spider opens (crawlproject/late_stop.py): Scrapy's stop
does nothing before the engine runs, and the process would end with the
spider never closed, the worker left in the crawl's worker set. With the
extension the spider closes (reason ``shutdown``) once open, the worker leaves
the fleet and the process exits 0. A real worker, a real Redis, a real site."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import redis

from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import REPO_ROOT, start_worker, stop_worker, tail, wait_all, wait_until
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb
from tests.test_lease_ends_crawl import counts

SLOW_OPEN = {
    "CRAWL_HOST_DELAY": 0.2,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "ITEM_PIPELINES": {"tests.spiders_for_tests.slow_open.SlowOpenPipeline": 10},
    "TEST_PIPELINE_OPEN_SECONDS": 4.0,
}


def test_a_stop_while_the_spider_opens_closes_it_once_open(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=2, pages=10)
    log_path = tmp_path / "w.log"
    proc = start_worker(REPO_ROOT, redis_server.url, "late", web.seeds, SLOW_OPEN, log_path)
    wait_until(lambda: "Pipeline opening slowly" in log_path.read_text(), timeout=60)
    with redis.Redis.from_url(redis_server.url) as client:
        workers = CrawlKeys("late", 1).workers  # shard-independent
        assert client.zcard(workers) == 1  # the frontier opened: the worker is in the fleet
        stop_worker(proc, signal.SIGTERM)  # while the pipelines are still opening
        wait_all([proc], timeout=90)
        log = log_path.read_text()
        assert "Shutdown asked while the spider was opening" in log, tail(log_path)
        assert "Spider closed (shutdown)" in log, tail(log_path)
        assert client.zcard(workers) == 0, "the worker stayed in the crawl's worker set"
    assert proc.returncode == 0, tail(log_path)
    # Whatever it had claimed once the engine ran went back: nothing stays leased.
    assert counts(redis_server.url, "late").get("leased", 0) == 0
