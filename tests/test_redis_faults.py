"""Redis dies mid-crawl: with AOF (appendfsync everysec) and a restart, the crawl
completes without a worker restart (issue 9: faults)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, tail, wait_all, wait_until
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, page_counts

DELAY = 0.3
DOWN_SECONDS = 2.0


def test_a_redis_restart_mid_crawl_loses_at_most_the_last_second(
    redis_server_factory: Callable[..., RedisServer],
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
) -> None:
    redis = redis_server_factory(appendonly=True, extra_args=["--appendfsync", "everysec"])
    web = testweb_factory(hosts=4, pages=20, latency_ms=(10, 30), links=2, cross_links=1,
                          query_variants=0)  # fmt: skip
    settings = {"CRAWL_HOST_DELAY": DELAY, "CRAWL_IDLE_CLOSE_SECONDS": 3.0,
                "CRAWL_IDLE_POLL_SECONDS": 0.2, "CRAWL_DEDUPE_ENABLED": False}  # fmt: skip
    workers = [
        start_worker(REPO_ROOT, redis.url, "aof", web.seeds, settings, tmp_path / f"w{i}.log")
        for i in range(2)
    ]
    wait_until(lambda: len(page_counts(web.log)) >= 20, timeout=60)
    assert all(w.poll() is None for w in workers)
    before = len(web.log)
    # SIGKILL: the AOF (fsync every second) keeps all but the last second.
    redis.restart(graceful=False, down_seconds=DOWN_SECONDS)
    wait_all(workers, timeout=180)
    for w in workers:
        assert w.returncode == 0, tail(w.log_path)
    # Both workers met the outage, waited and went on: no worker was restarted.
    for w in workers:
        assert "Redis error in frontier" in w.log_path.read_text()
    assert len(web.log) > before + 20
    counts = page_counts(web.log)
    assert set(counts) == web.expected_urls  # every page fetched
    # At most the URLs in flight (2 workers x 4 hosts, one slot each) and those
    # whose lost last second of writes brings them back are fetched twice.
    twice = {u: n for u, n in counts.items() if n > 1}
    assert sum(n - 1 for n in twice.values()) <= 8, twice
    assert sum(stats_of(w.log_path).get("frontier/acks", 0) for w in workers) > 0
