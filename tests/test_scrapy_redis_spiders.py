"""Spiders written for scrapy-redis run unchanged on the shared frontier and
end as any spider does (issue 41, item 7): a ``RedisSpider`` and a
``RedisCrawlSpider`` (with Rules), start URLs LPUSHed to their ``redis_key``
as scrapy-redis's README says, on a real redis-server and a loopback test web:
the whole site crawled, each page once, the worker ends by itself, exit 0."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from testkit.crawlproc import REPO_ROOT, start_worker, wait_all
from testkit.testweb import TestWeb, canonical_url, page_counts

FAST = {
    "CRAWL_HOST_DELAY": 0.05,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "SPIDER_MODULES": "spiders,tests.spiders_for_tests.scrapy_redis_spiders",
}


def crawl_whole_site(
    spider: str,
    redis_key: str,
    redis_url: str,
    web: TestWeb,
    tmp_path: Path,
    settings: dict[str, object] | None = None,
) -> tuple[float, str]:
    """Pushes the site's seed as scrapy-redis's README does, runs the spider
    to its end (exit 0 checked) and checks the feed and the fetches; returns
    how long it ran and its log."""
    redis.Redis.from_url(redis_url).lpush(redis_key, web.base_url(1))
    out = tmp_path / "items.jsonl"
    started = time.monotonic()
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], {**FAST, **(settings or {})}, tmp_path / "w.log",
        extra_args=["-O", str(out)], spider=spider,
    )  # fmt: skip
    assert wait_all([proc], timeout=120) == [0]  # ended by itself
    took = time.monotonic() - started
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls  # the whole site
    assert set(fetched.values()) == {1}  # each page once
    items = [json.loads(line) for line in out.read_text().splitlines()]
    # A CrawlSpider's start page goes to parse_start_url (no item), as in Scrapy.
    crawl_spider = spider == "mycrawler_redis"
    pages = web.expected_urls - ({canonical_url(web.base_url(1))} if crawl_spider else set())
    assert sorted(canonical_url(i["url"]) for i in items) == sorted(pages)  # each once
    assert all(set(i) == {"url", "title"} for i in items)  # the spider's fields only
    log = proc.log_path.read_text()
    assert "'finish_reason': 'finished'" in log
    return took, log


@pytest.mark.parametrize(
    ("spider", "redis_key"),
    [("myspider", "myspider:start_urls"), ("mycrawler_redis", "mycrawler:start_urls")],
)
def test_a_scrapy_redis_spider_crawls_its_site_and_ends(
    spider: str,
    redis_key: str,
    redis_url: str,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
) -> None:
    web = testweb_factory(hosts=1, pages=8, links=2, cross_links=0, query_variants=0)
    _, log = crawl_whole_site(spider, redis_key, redis_url, web, tmp_path)
    # Its redis_key is the crawl's seed list, taken whole once stored.
    assert f"its start URLs are read from '{redis_key}' by the frontier" in log
    assert redis.Redis.from_url(redis_url).llen(redis_key) == 0
    assert "Frontier empty and nothing in flight" in log


def test_max_idle_time_before_close_is_the_idle_wait(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # scrapy-redis's own way to end a RedisSpider: seconds idle before closing.
    web = testweb_factory(hosts=1, pages=4, links=1, cross_links=0, query_variants=0)
    settings = {"CRAWL_IDLE_CLOSE_SECONDS": 60, "MAX_IDLE_TIME_BEFORE_CLOSE": 2}
    took, log = crawl_whole_site(
        "myspider", "myspider:start_urls", redis_url, web, tmp_path, settings
    )
    assert "MAX_IDLE_TIME_BEFORE_CLOSE=2: finishing after 2 s" in log
    assert took < 60  # not CRAWL_IDLE_CLOSE_SECONDS


def test_continuous_mode_keeps_a_scrapy_redis_spider_up(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # Asked for, as any spider: it takes start URLs pushed while it runs.
    web = testweb_factory(hosts=2, pages=3, links=1, cross_links=0)
    client = redis.Redis.from_url(redis_url)
    client.lpush("myspider:start_urls", web.base_url(1))
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], FAST, tmp_path / "w.log",
        extra_args=["-a", "mode=continuous"], spider="myspider",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not any(web.base_url(1) == r.url for r in web.log):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        time.sleep(4)  # well past CRAWL_IDLE_CLOSE_SECONDS: still up
        assert proc.poll() is None
        client.lpush("myspider:start_urls", web.base_url(2))
        while not any(web.base_url(2) == r.url for r in web.log):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
    finally:
        proc.terminate()
    assert wait_all([proc], timeout=60) == [0]


def test_an_unreadable_max_idle_time_is_one_line_before_the_start(
    redis_url: str, tmp_path: Path
) -> None:
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], {**FAST, "MAX_IDLE_TIME_BEFORE_CLOSE": "soon"},
        tmp_path / "w.log", spider="myspider",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) == [1]
    log = proc.log_path.read_text()
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert [line.split(" ERROR: ", 1)[1] for line in errors] == [
        "Not started: MAX_IDLE_TIME_BEFORE_CLOSE='soon': expected a whole number of seconds "
        ">= 0 (scrapy-redis's; 0: not set, CRAWL_IDLE_CLOSE_SECONDS applies)"
    ]
    assert "Traceback" not in log
