"""Real workers started as scrapy-redis users and containers start them: only
REDIS_HOST/REDIS_PORT, or REDIS_URL only in the environment, join the fleet's
Redis; REDIS_START_URLS_KEY seeds; SCHEDULER_PERSIST=False deletes the crawl's
keys once the fleet's crawl ended (not when one worker of two stops); settings
that cannot apply end the start with one line and exit status 1; behind an
HTTP proxy the private-address guard still checks the target host."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import (
    REPO_ROOT,
    start_worker,
    stats_of,
    stop_worker,
    wait_all,
    wait_until,
)
from testkit.http_proxy import HttpProxy
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, page_counts

FAST = {"CRAWL_HOST_DELAY": 0.2, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}


def crawl_keys(url: str, crawl: str) -> list[bytes]:
    with redis.Redis.from_url(url) as client:
        return sorted(client.scan_iter(match=f"cp:{{{crawl}*", count=1000))


def cli_counts(crawl: str, env: dict[str, str]) -> dict[str, int]:
    """``crawlproject counts`` with no --redis-url: the environment says where."""
    out = subprocess.run(
        [sys.executable, "-m", "crawlproject", "--crawl", crawl, "counts"],
        cwd=REPO_ROOT, env={**os.environ, **env}, check=True, capture_output=True, text=True,
        timeout=60,
    ).stdout  # fmt: skip
    return dict(json.loads(out))


def test_redis_host_port_or_environment_url_join_the_fleet_redis(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=2, pages=5, latency_ms=(5, 10), links=2, cross_links=0)
    port = redis_server.port
    by_host = start_worker(
        REPO_ROOT, None, "viahost", web.seeds,
        {**FAST, "REDIS_HOST": "127.0.0.1", "REDIS_PORT": port}, tmp_path / "host" / "w.log",
    )  # fmt: skip
    by_env = start_worker(
        REPO_ROOT, None, "viaenv", web.seeds, FAST, tmp_path / "env" / "w.log",
        env={"REDIS_URL": redis_server.url},
    )  # fmt: skip
    wait_all([by_host, by_env], timeout=120)
    host_log = by_host.log_path.read_text()
    env_log = by_env.log_path.read_text()
    assert f"Redis: redis://127.0.0.1:{port} from REDIS_HOST/REDIS_PORT/REDIS_PARAMS" in host_log
    assert (
        f"Redis: {redis_server.url} from the REDIS_URL environment variable; "
        "CRAWL_NAME='viaenv' (spider argument)"
    ) in env_log
    for proc, crawl in ((by_host, "viahost"), (by_env, "viaenv")):
        log = proc.log_path.read_text()
        assert "embedded Redis" not in log
        assert not (proc.log_path.parent / "crawl-data" / "redis").exists()
        assert crawl_keys(redis_server.url, crawl), f"no keys of {crawl} in the test Redis"
        # The operator's command finds the crawl through the environment too.
        counts = cli_counts(crawl, {"REDIS_URL": redis_server.url})
        assert counts["done"] == len(web.expected_urls) and counts["queued"] == 0
    assert all(n == 2 for n in page_counts(web.log).values())  # once per crawl


def test_start_urls_key_and_persist_false_deletes_only_when_the_fleet_is_done(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # 40 pages a host at 0.2 s each: the crawl outlasts both workers' start.
    web = testweb_factory(hosts=3, pages=40, latency_ms=(20, 40), links=2, cross_links=0)
    url = redis_server.url
    with redis.Redis.from_url(url) as client:
        client.lpush("seeds:persist", *web.seeds)  # the only seeds: none on the command line
    settings = {**FAST, "REDIS_START_URLS_KEY": "seeds:%(name)s", "SCHEDULER_PERSIST": False}

    def worker(tag: str) -> subprocess.Popen[bytes]:
        own = {**settings, "USER_AGENT": f"crawlproject-{tag}"}
        return start_worker(REPO_ROOT, url, "persist", [], own, tmp_path / f"{tag}.log")

    def fetched_by(tag: str) -> int:
        return sum(r.headers.get("user-agent") == f"crawlproject-{tag}" for r in web.log)

    def registered() -> int:
        with redis.Redis.from_url(url) as client:
            return int(client.zcard(CrawlKeys("persist", 1).workers))  # shard-independent

    # Answers take 1 s until both workers are in the crawl: a alone may otherwise end the
    # crawl (120 pages at 0.2 s a host) before b has started on a loaded machine.
    usual_latency = dict(web.latency)
    web.latency.update(dict.fromkeys(usual_latency, 1.0))
    a, b = worker("a"), worker("b")
    # Both are workers of the crawl and it is under way. Not "both fetched":
    # with 3 hosts the worker that took the seeds may hold every host's slot
    # (it asks again at once the shards it added to; an idle one probes them
    # in turns, claims.py), so which worker fetches is not fixed.
    wait_until(lambda: registered() == 2 and len(web.log) >= 3, timeout=180)
    assert len(page_counts(web.log)) < len(web.expected_urls), "the crawl ended before b stopped"
    stop_worker(b, signal.SIGTERM)  # one worker of two stops: the crawl goes on
    wait_all([b], timeout=60)
    web.latency.update(usual_latency)
    assert a.poll() is None, "worker a ended with b"
    assert crawl_keys(url, "persist"), "a stopping worker deleted the crawl under the other"
    assert "deleted its" not in Path(tmp_path / "b.log").read_text()
    wait_all([a], timeout=120)
    log = Path(tmp_path / "a.log").read_text()
    assert re.search(
        r"crawl 'persist' ended and this was its last worker: deleted its \d+ keys", log
    )
    assert set(page_counts(web.log)) == web.expected_urls
    assert fetched_by("a") >= 1  # a went on with the crawl b left
    taken = [stats_of(tmp_path / f"{t}.log").get("frontier/start_urls", 0) for t in "ab"]
    assert sum(taken) == len(web.seeds)  # from seeds:persist, the named list
    assert crawl_keys(url, "persist") == []
    with redis.Redis.from_url(url) as client:
        assert not client.exists("seeds:persist", "persist:start_urls")


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ("SCHEDULER=scrapy_redis.scheduler.Scheduler", "SCHEDULER=scrapy_redis.scheduler"),
        ("SCHEDULER_QUEUE_CLASS=scrapy_redis.queue.FifoQueue", "SCHEDULER_QUEUE_CLASS="),
        ("DUPEFILTER_CLASS=scrapy_redis.dupefilter.RFPDupeFilter", "DUPEFILTER_CLASS="),
        ("SCHEDULER_IDLE_BEFORE_CLOSE=30", "use CRAWL_IDLE_CLOSE_SECONDS"),
        ("REDIS_START_URLS_AS_SET=True", "the seed list is a Redis LIST"),
        ('CRAWL_HOST_OVERRIDES={"https://a.test/x": {"delay": 1}}', "CRAWL_HOST_OVERRIDES: "),
        ("CRAWL_ALLOW_HOSTS=*.a.test", "write '.a.test'"),
        ("DNSCACHE_SIZE=10", "DNSCACHE_SIZE='10' and CRAWL_DNS_CACHE_SIZE"),
    ],
)
def test_settings_that_cannot_apply_end_the_start_with_one_line(
    redis_server: RedisServer, tmp_path: Path, setting: str, line: str
) -> None:
    name, _, value = setting.partition("=")
    settings: dict[str, object] = {name: value}
    if name == "DNSCACHE_SIZE":
        settings["CRAWL_DNS_CACHE_SIZE"] = 20
    proc = start_worker(
        REPO_ROOT, redis_server.url, "refused", ["http://127.0.3.1:9/"], settings,
        tmp_path / "w.log",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) == [1]
    text = proc.log_path.read_text()
    errors = [row for row in text.splitlines() if " ERROR: " in row]
    assert len(errors) == 1, text
    assert "Not started: " in errors[0] and line in errors[0], errors[0]
    assert "Traceback" not in text
    assert not crawl_keys(redis_server.url, "refused")  # stopped before the frontier


def test_guard_checks_the_target_host_behind_a_proxy(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """HTTP_PROXY in the environment: the proxy would resolve ``localhost``
    (loopback, refused) itself; the worker resolves it and refuses it first,
    while the allowed web (127.0.3.0/24) is crawled through the proxy."""
    # localhost reached by a redirect: a seed of localhost is refused before
    # it is queued (crawlproject/frontier/admission/seed_check.py), never fetched.
    go = {"status": 302, "headers": {"Location": "http://localhost:9/"}}
    web = testweb_factory(hosts=1, pages=3, latency_ms=0, links=1, cross_links=0,
                          special={1: {"/go-local": go}})  # fmt: skip
    refused = web.base_url(1) + "go-local"
    # The proxy's own address is checked too: allowed, and not localhost's.
    with HttpProxy("127.0.0.2") as proxy:
        proc = start_worker(
            REPO_ROOT, redis_server.url, "proxied", [*web.seeds, refused],
            {**FAST, "CRAWL_GUARD_ALLOW": "127.0.3.0/24,127.0.0.2"}, tmp_path / "w.log",
            env={"HTTP_PROXY": proxy.url, "http_proxy": proxy.url, "NO_PROXY": "", "no_proxy": ""},
        )  # fmt: skip
        wait_all([proc], timeout=120)
    assert set(page_counts(web.log)) == web.expected_urls | {refused}
    assert "127.0.3.1" in proxy.hosts_requested()  # the crawl went through the proxy
    assert "localhost" not in proxy.hosts_requested(), proxy.requests
    stats = stats_of(proc.log_path)
    assert stats.get("guard/blocked", 0) + stats.get("guard/blocked_robotstxt", 0) >= 1
    assert "Guard: not fetching http://localhost:" in proc.log_path.read_text()
