"""Two workers of a spider whose pages cost CPU, on a few sites of the
operator's: the crawl is shared, not kept by the worker that claimed the
hosts first. A worker whose callbacks hold it leaves its hosts' next URLs to
the other (its own claim comes late: its loop was busy), so the second
worker is not left idle while the first one is the crawl's limit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb

SETTINGS = {
    "CRAWL_HOST_DELAY": 0.25,
    "CRAWL_IDLE_CLOSE_SECONDS": 2,
    "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
}


def test_two_workers_of_a_heavy_spider_share_a_few_sites(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=3, pages=30, links=4, cross_links=0)
    start = ",".join(web.base_url(i) for i in (1, 2, 3))
    procs = [
        start_worker(
            REPO_ROOT,
            redis_url,
            None,
            [],
            SETTINGS,
            tmp_path / f"w{n}.log",
            extra_args=["-a", "start=" + start, "-a", "cost=0.2"],
            spider="heavy",
        )
        for n in range(2)
    ]
    wait_all(procs, timeout=240)
    pages = Counter(r.url for r in web.log if not r.path.startswith("/robots.txt"))
    # Each site: its root and 30 pages, each fetched once (the roots are
    # both workers' start requests: once for the crawl, admission.py).
    assert len(pages) == 3 * 31 and set(pages.values()) == {1}, pages.most_common(3)
    # One worker alone takes 0.2 s a page, slower than the sites allow (12
    # pages a second): each must have taken a fair part of the crawl.
    counts = [int(stats_of(p.log_path).get("response_received_count", 0)) for p in procs]
    robots = 3 * 2  # each worker reads each site's robots.txt once at most
    assert sum(counts) <= 3 * 31 + robots
    assert min(counts) >= 3 * 31 // 4, counts
