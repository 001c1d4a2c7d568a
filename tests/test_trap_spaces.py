"""Soft-404 spaces and link farms, through real crawls of a loopback test web.

Three workers with default settings crawl four ordinary sites beside a
soft-404 host (every path answers 200 with one template echoing the path and
linking deeper) and a link farm (near-identical pages, each linking to three
new ones); both trap hosts have ordinary pages too. Every trap page is distinct
(a path, a few words), so only the near-duplicate test and the soft-404 probe
hold them.

Bounds (one politeness slot per host, so a host's pages are fetched one at a
time): the soft-404 host's first suspect page (``/missing/``, which echoes its
path) queues the probe in the host's best band, so the probe is its next fetch;
from its answer on every trap page is a soft 404 whose links are not followed.
Its trap fetches are ``/missing/``, the probe, the two children of /missing/ and
whatever children other workers' pages in flight meanwhile added: a handful; we
allow SOFT404_BOUND. The farm's first page is new and its three links are
followed; the others are near copies of a page of their own host, whose links
are not followed, but for the rare one more than CRAWL_SIMHASH_K bits from every
farm page seen before (a new page: three more links): a few dozen at most, we
allow FARM_BOUND.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

from crawlproject.dedupe.soft404 import soft404_hosts
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import REPO_ROOT, crawl_status, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, host_ip, page_counts, politeness_report

DELAY = 0.002
FAST = {"CRAWL_HOST_DELAY": DELAY, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}
SOFT404, FARM = 5, 6
SOFT404_BOUND = 20
FARM_BOUND = 40
PROBE_PATH = re.compile(r"/[0-9a-f]{16}-[0-9a-f]{16}\.html")


async def recorded_soft404_hosts(redis_url: str, crawl: str) -> dict[str, str]:
    redis = redis_client(redis_url)
    try:
        return await soft404_hosts(redis, CrawlKeys(crawl, 1).soft404)
    finally:
        await redis.aclose()


def test_soft404_space_and_link_farm_are_held_and_the_crawl_ends(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=FARM, pages=15, latency_ms=0, links=3, cross_links=1,
        traps={SOFT404: "soft404", FARM: "farm"},
    )  # fmt: skip
    procs = [
        start_worker(REPO_ROOT, redis_server.url, "spaces", web.seeds, FAST, tmp_path / f"w{i}.log")
        for i in range(3)
    ]
    wait_all(procs, timeout=240)  # ends by itself: CRAWL_IDLE_CLOSE_SECONDS
    stats: dict[str, int] = {}
    for proc in procs:
        for key, value in stats_of(proc.log_path).items():
            stats[key] = stats.get(key, 0) + value
    log = [r for r in web.log if r.path != "/robots.txt"]
    probes = [r for r in log if PROBE_PATH.fullmatch(r.path)]
    traps = web.trap_fetches(log)

    # Every ordinary page (the trap hosts' own included) fetched exactly once.
    normal = {
        u: n
        for u, n in page_counts(log).items()
        if web.trap_kind(u) is None and not PROBE_PATH.search(u)
    }
    assert set(normal) == web.expected_urls
    assert all(n == 1 for n in normal.values())

    # Each trap held, and the reasons are in the stats.
    assert 0 < traps[SOFT404] <= SOFT404_BOUND, traps
    assert 0 < traps[FARM] <= FARM_BOUND, traps
    assert stats["trap/soft404_hosts"] == 1
    assert stats["trap/soft404"] >= 1
    assert stats["dedupe/near"] >= 1  # farm pages: copies of a page of their host
    assert stats["dedupe/links_not_followed"] >= 2 * stats["trap/soft404"]
    # One probe per suspect host, at most, for the whole fleet: the soft-404
    # host's answered 200 (it is counted among its trap fetches), the farm's 404.
    by_host = {r.host_ip: r.status for r in probes}
    assert len(by_host) == len(probes) == stats["trap/soft404_probes"]
    assert by_host[host_ip(SOFT404)] == 200
    assert set(by_host) <= {host_ip(SOFT404), host_ip(FARM)}
    assert all(status == 404 for ip, status in by_host.items() if ip != host_ip(SOFT404))

    # The fleet's record names the soft-404 host (and its probe), and the
    # operator's status counts it.
    found = asyncio.run(recorded_soft404_hosts(redis_server.url, "spaces"))
    assert list(found) == [f"{host_ip(SOFT404)}:{web.port}"]
    assert PROBE_PATH.search(found[f"{host_ip(SOFT404)}:{web.port}"])
    trap_group = crawl_status(redis_server.url, "spaces")["fleet"]["groups"]["trap"]
    assert trap_group["soft404_hosts"] == 1 and trap_group["soft404"] >= 1

    for host, p in politeness_report(web.log, DELAY).items():
        assert p.max_in_flight <= 1, (host, p)


def test_a_soft404_space_of_short_pages_is_held_by_the_probe_alone(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # No page has the text the near-duplicate test asks for here (it is as if
    # every soft-404 page were a one-line "/a/b not found"): only the probe,
    # queued for the first page that echoes its own path, can hold the space.
    web = testweb_factory(
        hosts=3, pages=10, latency_ms=0, links=3, cross_links=1, traps={3: "soft404"}
    )
    settings = {**FAST, "CRAWL_DEDUPE_MIN_TEXT_CHARS": 1_000_000}
    proc = start_worker(
        REPO_ROOT, redis_server.url, "short", web.seeds, settings, tmp_path / "w.log"
    )
    wait_all([proc], timeout=240)
    stats = stats_of(proc.log_path)
    log = [r for r in web.log if r.path != "/robots.txt"]
    normal = {u: n for u, n in page_counts(log).items() if web.trap_kind(u) is None}
    assert set(normal) == web.expected_urls and all(n == 1 for n in normal.values())
    assert 0 < web.trap_fetches(log)[3] <= SOFT404_BOUND
    assert stats.get("dedupe/checked/near", 0) == 0  # the index held nothing back
    assert stats["trap/soft404_probes"] == stats["trap/soft404_hosts"] == 1
    assert stats["trap/soft404"] >= 1
