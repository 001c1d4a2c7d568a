"""Scrapy's own crawl-ending, depth and ordering settings, as the spiders of
Scrapy's docs use them, with workers sharing one frontier on a real
redis-server: CLOSESPIDER_* end one worker (exit 0) and the crawl stays
resumable, nothing lost; DEPTH_LIMIT keeps its meaning across workers;
Request.priority orders a host's queue; Scrapy's BFS recipe (DEPTH_PRIORITY
and FIFO queues) is what the frontier does already; a depth-first order is
refused at start; JOBDIR keeps spider.state."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from testkit.crawlproc import (
    REPO_ROOT,
    WorkerProcess,
    start_worker,
    stats_of,
    wait_all,
    wait_until,
)
from testkit.testweb import TestWeb, page_counts
from tests.test_own_spider_crawl import FAST


def follow(
    redis_url: str, web: TestWeb, settings: Mapping[str, object], log: Path, out: Path
) -> WorkerProcess:
    """A worker of the ``follow`` spider (tests/spiders_for_tests/scrapy_settings.py)
    from every host's ``/``, its items to ``out``."""
    start = "start=" + ",".join(web.seeds)
    return start_worker(
        REPO_ROOT, redis_url, None, [], {**FAST, **settings}, log,
        extra_args=["-a", start, "-O", str(out)], spider="follow",
    )  # fmt: skip


def items_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def counts_of(redis_url: str, crawl: str) -> dict[str, int]:
    """``crawlproject --crawl CRAWL counts``: the frontier's counters."""
    cli = [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", crawl]
    done = subprocess.run([*cli, "counts"], cwd=REPO_ROOT, check=True, capture_output=True)
    counts: dict[str, int] = json.loads(done.stdout)
    return counts


def within(web: TestWeb, hops: int) -> set[str]:
    """The pages at most ``hops`` links from their host's ``/`` (a web
    without cross links nor query variants)."""
    depth = {(h, 0): 0 for h in range(1, len(web.ips) + 1)}
    todo = list(depth)
    while todo:
        h, k = todo.pop(0)
        if depth[h, k] == hops:
            continue
        for link in web.graph[h, k]:
            if (link.host, link.page) not in depth:
                depth[link.host, link.page] = depth[h, k] + 1
                todo.append((link.host, link.page))
    return {f"http://{web.ips[h - 1]}:{web.port}{web.path_of(k)}" for h, k in depth}


@pytest.mark.parametrize(
    ("setting", "reason", "host_delay"),
    [
        ({"CLOSESPIDER_PAGECOUNT": 6}, "closespider_pagecount", 0.05),
        ({"CLOSESPIDER_ITEMCOUNT": 4}, "closespider_itemcount", 0.05),
        ({"CLOSESPIDER_TIMEOUT": 3}, "closespider_timeout", 0.4),
    ],
)
def test_closespider_ends_one_worker_and_the_crawl_resumes_without_loss(
    redis_url: str,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    setting: dict[str, object],
    reason: str,
    host_delay: float,
) -> None:
    """A worker closed by Scrapy's CloseSpider (its own count) exits 0 with
    that reason and hands back what it held; a second run (no CLOSESPIDER)
    finishes the crawl: every page fetched, twice only what was in flight at
    the close. JOBDIR keeps the spider's ``state`` from one run to the next."""
    web = testweb_factory(hosts=2, pages=20, links=2, cross_links=0, query_variants=0)
    jobdir = str(tmp_path / "job")
    settings = {"CRAWL_HOST_DELAY": host_delay, "JOBDIR": jobdir}
    first = follow(redis_url, web, {**settings, **setting}, tmp_path / "w1.log", tmp_path / "1.jl")
    wait_all([first], timeout=90)  # exit status 0, or it raises
    log = first.log_path.read_text()
    assert f"'finish_reason': '{reason}'" in log
    assert "Traceback" not in log and " ERROR: " not in log
    assert "JOBDIR" in log and "spider.state" in log  # what JOBDIR means here: one line
    fetched_first = page_counts(web.log)
    assert 0 < len(fetched_first) < len(web.expected_urls)
    returned = stats_of(first.log_path).get("frontier/returned", 0)
    counts = counts_of(redis_url, "follow")
    # Consistent: nothing left leased, every fetched page done or back in a queue.
    assert counts["leased"] == 0 and counts["queued"] > 0
    assert len(fetched_first) - returned <= counts["done"] <= len(fetched_first)

    second = follow(redis_url, web, settings, tmp_path / "w2.log", tmp_path / "2.jl")
    wait_all([second], timeout=90)
    assert "'finish_reason': 'finished'" in second.log_path.read_text()
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls
    twice = [url for url, n in fetched.items() if n > 1]
    assert all(n <= 2 for n in fetched.values()) and len(twice) <= returned, (twice, returned)
    counts = counts_of(redis_url, "follow")
    assert counts["queued"] == counts["leased"] == 0
    assert counts["done"] == len(web.expected_urls)
    # Scrapy's SpiderState: the second run's spider.state goes on from the first's.
    kept = [i["state_pages"] for i in items_of(tmp_path / "1.jl")]
    again = [i["state_pages"] for i in items_of(tmp_path / "2.jl")]
    assert kept and again and min(again) == max(kept) + 1


def test_a_worker_closed_by_its_pagecount_leaves_the_crawl_to_the_fleet(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """Two workers, one with CLOSESPIDER_PAGECOUNT: it closes alone (exit 0),
    the other finishes the crawl, taking what the first handed back."""
    web = testweb_factory(hosts=3, pages=15, links=2, cross_links=0, query_variants=0)
    short = follow(
        redis_url, web, {"CLOSESPIDER_PAGECOUNT": 5}, tmp_path / "a.log", tmp_path / "a.jl"
    )
    # The second joins once the first has fetched its 5 pages: started together,
    # the second worker took every claim of these 3 hosts in one CI run (4 test
    # processes; docs/frontier.md "Never stall, never hoard"), the first none.
    wait_until(lambda: len(page_counts(web.log)) >= 5 or short.poll() is not None, timeout=60)
    full = follow(redis_url, web, {}, tmp_path / "b.log", tmp_path / "b.jl")
    wait_all([short, full], timeout=120)
    assert "'finish_reason': 'closespider_pagecount'" in short.log_path.read_text()
    assert "'finish_reason': 'finished'" in full.log_path.read_text()
    returned = stats_of(short.log_path).get("frontier/returned", 0)
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls
    assert sum(n - 1 for n in fetched.values()) <= returned
    assert stats_of(full.log_path)["frontier/claims"] > stats_of(short.log_path)["frontier/claims"]


def test_depth_limit_with_two_workers_fetches_what_is_within_reach_once(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=4, pages=40, links=3, cross_links=0, query_variants=0)
    want = within(web, 2)
    assert len(want) < len(web.expected_urls)  # the limit cuts something
    # Each worker holds two hosts at most, so that both usually take part (a
    # page's depth then comes from the other worker's fetch as often as not).
    # Not asserted: on 4 hosts with a short delay, the worker fetching a host
    # claims it again the moment it is due (it knows when), while the other
    # finds it only by probing the empty shards, 8 a poll: in about 1 run of 7
    # one worker took every claim (claims.py ClaimClock; nothing lost).
    settings = {"DEPTH_LIMIT": 2, "CONCURRENT_REQUESTS": 2, "CRAWL_CLAIM_PREFETCH": 0}
    procs = [
        follow(redis_url, web, settings, tmp_path / f"w{n}.log", tmp_path / f"{n}.jl")
        for n in range(2)
    ]
    wait_all(procs, timeout=120)
    assert page_counts(web.log) == dict.fromkeys(want, 1)
    items = [i for n in range(2) for i in items_of(tmp_path / f"{n}.jl")]
    assert max(i["depth"] for i in items) == 2


def test_request_priority_orders_a_hosts_queue(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """One host, one request at a time: of the links its start page asks for,
    the higher ``Request.priority`` is fetched first (Scrapy's order)."""
    web = testweb_factory(hosts=1, pages=8, links=1, cross_links=0, query_variants=0)
    # The host waits 1 s between fetches: the start page's links are all queued by then.
    settings = {**FAST, "CRAWL_HOST_DELAY": 1.0, "CRAWL_HOST_CONCURRENCY": 1}
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], settings, tmp_path / "w.log",
        extra_args=["-a", "start=" + web.seeds[0], "-a", "priorities=-3,-2,-1,0,1,5"],
        spider="priority_order",
    )  # fmt: skip
    wait_all([proc], timeout=90)
    order = [r.path for r in web.log if r.path.startswith("/p/")]
    # Priority 5 and 1 both come first (a priority above a link's depth does
    # not raise it further: docs/crawling.md), in the order they were asked.
    assert order == ["/p/5", "/p/6", "/p/4", "/p/3", "/p/2", "/p/1"]


def test_scrapys_bfs_recipe_keeps_its_meaning(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """Scrapy's FAQ: DEPTH_PRIORITY = 1 and FIFO queues crawl breadth-first.
    The frontier's order is breadth-first by depth already: the settings are
    accepted, one INFO line says so, and the crawl goes depth by depth."""
    web = testweb_factory(hosts=1, pages=20, links=2, cross_links=0, query_variants=0)
    bfs = {
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
        "CRAWL_HOST_DELAY": 0.2,
    }
    proc = follow(redis_url, web, bfs, tmp_path / "w.log", tmp_path / "items.jl")
    wait_all([proc], timeout=90)
    lines = [line for line in proc.log_path.read_text().splitlines() if "breadth-first" in line]
    assert len(lines) == 1 and " INFO: " in lines[0], lines
    depths = [i["depth"] for i in items_of(tmp_path / "items.jl")]
    assert depths == sorted(depths) and max(depths) >= 3
    assert set(page_counts(web.log)) == web.expected_urls


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("DEPTH_PRIORITY", "-1"),
        ("SCHEDULER_MEMORY_QUEUE", "scrapy.squeues.LifoMemoryQueue"),
        ("SCHEDULER_DISK_QUEUE", "scrapy.squeues.PickleLifoDiskQueue"),
        ("SCHEDULER_PRIORITY_QUEUE", "myproject.queues.MyQueue"),
    ],
)
def test_an_order_the_frontier_cannot_keep_is_refused_at_start(
    redis_url: str, tmp_path: Path, setting: str, value: str
) -> None:
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], {**FAST, setting: value}, tmp_path / "w.log",
        extra_args=["-a", "start=http://127.0.3.1:9/"], spider="follow",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) == [1]
    log = proc.log_path.read_text()
    refused = [line for line in log.splitlines() if "Not started:" in line]
    assert len(refused) == 1 and setting in refused[0], log[-2000:]
    assert "Traceback" not in log and "Spider opened" not in log
