"""Real ``scrapy crawl web`` workers sharing one real redis-server, against a loopback web.

Each test runs whole crawls: worker subprocesses, a multi-host test web whose
server-side log (start and end time of every request) is the judge of
politeness and of what was fetched.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import redis

from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import (
    REPO_ROOT,
    WorkerProcess,
    start_worker,
    stats_of,
    stop_worker,
    wait_all,
    wait_until,
)
from testkit.testweb import (
    OUT_OF_SCOPE_IP,
    TestWeb,
    page_counts,
    politeness_report,
)

DELAY = 0.3
FAST = {
    "CRAWL_HOST_DELAY": DELAY,
    "CRAWL_IDLE_CLOSE_SECONDS": 2,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "LOG_LEVEL": "INFO",
}


def assert_polite(web: TestWeb, delay: float) -> None:
    # robots.txt fetches use the host's politeness slot like any other request.
    report = politeness_report(web.log, delay)
    for host, p in report.items():
        assert p.max_in_flight <= 1, f"{host}: {p.max_in_flight} requests in flight at once"
        assert p.gaps_below_delay == 0, f"{host}: start-to-start gap {p.min_gap:.3f}s < {delay}"
        assert p.idle_below_delay == 0, f"{host}: end-to-start idle {p.min_idle:.3f}s < {delay}"


def workers(
    n: int, redis_url: str, crawl: str, web: TestWeb, tmp_path: Path, tag: str, **settings: object
) -> list[WorkerProcess]:
    config = {**FAST, **settings}
    return [
        start_worker(REPO_ROOT, redis_url, crawl, web.seeds, config, tmp_path / f"{tag}-{i}.log")
        for i in range(n)
    ]


def test_three_workers_fetch_every_page_once_politely(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=20, pages=6, latency_ms=(5, 40), links=4, cross_links=1, links_out_of_scope=1
    )
    procs = workers(3, redis_url, "fleet", web, tmp_path, "w")
    wait_all(procs, timeout=120)

    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls
    assert all(n == 1 for n in fetched.values()), {u: n for u, n in fetched.items() if n > 1}
    assert not [r for r in web.log if r.host_ip == OUT_OF_SCOPE_IP]
    assert_polite(web, DELAY)
    stats = [stats_of(p.log_path) for p in procs]
    # No hoarding: every worker got a share of the work.
    assert all(s.get("frontier/claims", 0) > 0 for s in stats), stats
    # Each host's first claimed URL fetched its robots.txt and went back to its queue.
    robots = Counter(r.host_ip for r in web.log if r.path == "/robots.txt")
    assert robots == Counter({ip: 1 for ip in web.ips}), robots
    deferred = sum(s.get("frontier/deferred", 0) for s in stats)
    assert deferred == len(web.ips)
    assert sum(s.get("frontier/claims", 0) for s in stats) == len(web.expected_urls) + deferred
    # Links seen before are dropped, in Redis or by the worker that sent them.
    assert sum(s.get("frontier/seen_hits", 0) + s.get("frontier/seen_hits_local", 0) for s in stats)


def test_killed_worker_loses_nothing(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=8, pages=8, latency_ms=(150, 250), links=3, cross_links=1)
    settings = {"CRAWL_LEASE_SECONDS": 3, "CRAWL_HOST_DELAY": 0.1}
    victim_ua = "crawlproject-victim"
    (victim,) = workers(1, redis_url, "kill", web, tmp_path, "v", USER_AGENT=victim_ua, **settings)
    (survivor,) = workers(1, redis_url, "kill", web, tmp_path, "s", **settings)
    # Kill it while it holds a lease on a fetch in progress (fetches take 150+ ms).
    wait_until(lambda: sum(r.headers.get("user-agent") == victim_ua for r in web.log) >= 2)
    match = re.search(r"worker (\w+),", victim.log_path.read_text())
    assert match, "the victim's log names its worker id"
    fetching = f"f\t{match.group(1)}\t".encode()
    keys = CrawlKeys("kill", NEW_CRAWL_SHARDS)  # a new crawl's shards
    with redis.Redis.from_url(redis_url) as client:

        def victim_fetching() -> bool:
            return any(
                v.startswith(fetching)
                for prefix in keys.shard_prefixes
                for v in client.hvals(prefix + "lease")
            )

        wait_until(victim_fetching)
    stop_worker(victim, 9)  # SIGKILL: no goodbye, its leases stay behind
    victim.wait()
    wait_all([survivor], timeout=120)

    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls, "pages lost with the killed worker"
    stats = stats_of(survivor.log_path)
    assert stats.get("frontier/leases_reclaimed", 0) >= 1
    # Only what the victim held could be fetched twice.
    assert sum(n - 1 for n in fetched.values()) <= stats["frontier/leases_reclaimed"]
    assert_polite(web, 0.1)


def test_stop_all_and_resume_without_refetching(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=6, pages=10, latency_ms=(5, 20), links=3, cross_links=1)
    # Answers take 2 s until both are stopped: one worker alone crawls the 60 pages in a
    # few seconds, less than the other may take to start on a loaded machine.
    usual_latency = dict(web.latency)
    web.latency.update(dict.fromkeys(usual_latency, 2.0))
    # Stopped once both are in the crawl. Not "once both fetched": the first worker to
    # claim a host may keep every host's slot (it asks again when the host is ready;
    # an idle worker probes in turns), the more so while answers are slow.
    first = [
        start_worker(REPO_ROOT, redis_url, "resume", web.seeds,
                     {**FAST, "USER_AGENT": f"crawlproject-a{i}"}, tmp_path / f"a-{i}.log")
        for i in range(2)
    ]  # fmt: skip
    for p in first:
        wait_until(lambda p=p: "Frontier open:" in p.log_path.read_text(errors="replace"), 180)
    wait_until(lambda: len(web.log) >= 15)
    for p in first:
        stop_worker(p)  # SIGTERM: Scrapy's graceful shutdown
    wait_all(first, timeout=60)
    web.latency.update(usual_latency)
    done_first = len(web.log)
    assert 0 < done_first < len(web.expected_urls), "stopped too late to test a resume"

    second = workers(2, redis_url, "resume", web, tmp_path, "b")
    wait_all(second, timeout=120)
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls
    assert all(n == 1 for n in fetched.values()), {u: n for u, n in fetched.items() if n > 1}
    assert_polite(web, DELAY)


def test_request_with_body_and_headers_round_trips(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=1)
    body = b'{"q": "caf\xc3\xa9", "bin": "\x00\x01"}'
    out = tmp_path / "echo.jsonl"
    proc = start_worker(
        REPO_ROOT, redis_url, "echo", [web.base_url(1) + "echo"],
        {**FAST, "SPIDER_MODULES": "spiders,tests.spiders_for_tests"},
        tmp_path / "echo.log",
        extra_args=["-a", "body_hex=" + body.hex(), "-O", str(out)],
        spider="echo",
    )  # fmt: skip
    wait_all([proc], timeout=60)
    (record,) = [r for r in web.log if r.path == "/echo"]
    assert record.method == "PUT"
    assert record.headers["x-custom"] == "välue"
    assert record.headers["content-type"] == "application/json"
    (item,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert bytes.fromhex(item["sent_body_hex"]) == body
    assert item["echo"]["method"] == "PUT"
    assert item["cb_kwargs"] == {"tag": "round-trip"}
    assert item["meta_marker"] == [1, "two", {"three": 3.0}]
    stats = stats_of(proc.log_path)
    assert stats["frontier/enqueued"] == 1
    # Claimed twice: its first claim's slot fetched the host's robots.txt; the
    # request went back (decoded again from Redis, so the round trip is real).
    assert stats["frontier/claims"] == 2 and stats["frontier/deferred"] == 1
