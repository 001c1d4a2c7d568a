"""Budgets in real crawls (loopback test web, real redis-server, crawl
subprocesses): a seeded site is crawled whole whatever CRAWL_HOST_BUDGET; a
host the crawl found by itself (scope any) keeps its budget; the URLs waiting
over it are counted in the worker's finish line and in ``crawlproject status
--json``, and a raised CRAWL_HOST_BUDGET lets exactly them in at the next
start, each fetched once."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.crawlproc import REPO_ROOT, crawl_status, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, host_ip, page_counts

FAST = {
    "CRAWL_HOST_DELAY": 0.002,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "CRAWL_DEDUPE_ENABLED": False,
}
BUDGET = 20  # URLs per vote: far below the sites here
FINISH = re.compile(
    r"Frontier at close: (\d+) URLs queued, (\d+) leased, (\d+) done, (\d+) waiting"
)


def crawl(
    redis: RedisServer, name: str, seeds: list[str], log: Path, scope: str, **settings: object
) -> tuple[dict[str, int], tuple[int, ...]]:
    proc = start_worker(
        REPO_ROOT, redis.url, name, seeds, {**FAST, **settings}, log, ["-a", f"scope={scope}"]
    )
    wait_all([proc], timeout=240)
    found = FINISH.findall(log.read_text(errors="replace"))
    assert len(found) == 1, "one finish line per worker"
    return stats_of(log), tuple(int(x) for x in found[0])


@pytest.mark.parametrize("scope", ["hosts", "domains"])
def test_a_seeded_site_is_crawled_whole_whatever_the_budget(
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    scope: str,
) -> None:
    # 300 pages: more than the old rule's 20 x (1 + 9 seed votes) = 200.
    web = testweb_factory(
        hosts=1, pages=10, latency_ms=0, links=3, cross_links=0, host_pages={1: 300}
    )
    stats, finish = crawl(
        redis_server, "whole", web.seeds, tmp_path / "w.log", scope, CRAWL_HOST_BUDGET=BUDGET
    )
    counts = page_counts(web.log)
    assert set(counts) == web.expected_urls and len(counts) > 300
    assert all(n == 1 for n in counts.values())
    assert "trap/over_budget" not in stats
    assert finish[0] == finish[1] == 0 and finish[3] == 0
    assert crawl_status(redis_server.url, "whole")["frontier"]["waiting_over_budget"] == 0


def test_a_found_host_keeps_its_budget_until_the_budget_is_raised(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # Host 1 is seeded; host 2 is only linked from it (and links back).
    web = testweb_factory(
        hosts=2, pages=30, latency_ms=0, links=3, cross_links=1, host_pages={2: 150}
    )
    seeded, found = f"{host_ip(1)}:{web.port}", f"{host_ip(2)}:{web.port}"
    stats, finish = crawl(
        redis_server, "found", [web.seeds[0]], tmp_path / "1.log", "any", CRAWL_HOST_BUDGET=BUDGET
    )
    first = page_counts(web.log)
    on = {h: {u for u in first if f"//{h}/" in u} for h in (seeded, found)}
    # The seeded host whole; the found one up to its budget: its own vote and
    # host 1's registered domain's (IPs are their own domains).
    assert on[seeded] == {u for u in web.expected_urls if f"//{seeded}/" in u}
    assert len(on[found]) == BUDGET * 2
    waiting = stats["trap/over_budget"]
    assert waiting > 0 and finish[3] == waiting  # the finish line counts them
    assert finish[0] == finish[1] == 0  # nothing else left: the crawl finished
    status = crawl_status(redis_server.url, "found")["frontier"]
    assert status["waiting_over_budget"] == waiting and status["released_from_budget"] == 0

    # The next start with a raised budget lets exactly those in, once, and the
    # URLs they lead to (the host's budget now holds all of them).
    log = tmp_path / "2.log"
    stats2, finish2 = crawl(redis_server, "found", [], log, "any", CRAWL_HOST_BUDGET=1000)
    assert stats2["frontier/budget_released"] == waiting
    assert f"Released {waiting} URLs that waited over their host's budget" in log.read_text()
    counts = page_counts(web.log)
    assert all(n == 1 for n in counts.values()), [u for u, n in counts.items() if n > 1][:5]
    assert {u for u in counts if f"//{found}/" in u} == {
        u for u in web.expected_urls if f"//{found}/" in u
    }
    assert finish2[3] == 0
    assert crawl_status(redis_server.url, "found")["frontier"]["waiting_over_budget"] == 0


def test_a_spiders_allowed_domains_are_crawled_whole(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # A spider of one's own, seeded on host 1; host 2 is only linked, but in
    # its allowed_domains: the operator's, so no budget (20 x 2 votes otherwise).
    web = testweb_factory(
        hosts=2, pages=30, latency_ms=0, links=3, cross_links=1, host_pages={2: 150}
    )
    found = f"{host_ip(2)}:{web.port}"
    log = tmp_path / "allowed.log"
    proc = start_worker(
        REPO_ROOT, redis_server.url, "allowed", [web.seeds[0]],
        {**FAST, "CRAWL_HOST_BUDGET": BUDGET, "SPIDER_MODULES": "spiders,tests.spiders_for_tests"},
        log, ["-a", f"allowed={host_ip(1)},{host_ip(2)}"], spider="allowed",
    )  # fmt: skip
    wait_all([proc], timeout=240)
    counts = page_counts(web.log)
    on_found = {u for u in counts if f"//{found}/" in u}
    assert on_found == {u for u in web.expected_urls if f"//{found}/" in u}
    assert len(on_found) > BUDGET * 2
    assert all(n == 1 for n in counts.values())
    assert "trap/over_budget" not in stats_of(log)
