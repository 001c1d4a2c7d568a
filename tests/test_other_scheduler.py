"""A crawl under another scheduler: the frontier-only parts switch themselves off.

Scrapy's BaseSchedulerMeta duck-types issubclass/isinstance, so
``issubclass(scrapy.core.scheduler.Scheduler, FrontierScheduler)`` is True: a
frontier-only component that tested it would stay on under any scheduler (the
ack middlewares would then fail every page). They test the class hierarchy
(crawlproject/frontier/scrapy_glue/frontier_lookup.py is_frontier) and raise NotConfigured; this
crawl, with nothing switched off by hand, fails if that check regresses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from scrapy.core.scheduler import Scheduler
from w3lib.url import canonicalize_url

from crawlproject.frontier.scrapy_glue.frontier_lookup import is_frontier
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb, page_counts

PLAIN = {
    "SCHEDULER": "scrapy.core.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",  # ours leaves it to the frontier
}
FRONTIER_ONLY = (
    "frontier_ack.FrontierAckSpiderMiddleware",
    "frontier_ack.FrontierAckDownloaderMiddleware",
    "robotstxt.RobotsTxtMiddleware",
)


def test_issubclass_is_true_for_any_scheduler_but_is_frontier_is_not() -> None:
    assert issubclass(Scheduler, FrontierScheduler)  # why is_frontier exists
    assert not is_frontier(Scheduler)
    assert is_frontier(FrontierScheduler)


def test_a_crawl_under_scrapys_scheduler_fetches_its_pages(
    testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=2, pages=6, latency_ms=0, links=2, cross_links=1)
    out = tmp_path / "items.jsonl"
    log = tmp_path / "plain.log"
    # No Redis at all: nothing on this path may reach for the frontier's.
    proc = start_worker(
        REPO_ROOT, None, "plain", web.seeds, PLAIN, log, extra_args=["-O", str(out)]
    )
    wait_all([proc], timeout=120)
    assert proc.returncode == 0, log.read_text()[-3000:]
    items = [json.loads(line) for line in out.read_text().splitlines()]
    # Scrapy's scheduler keeps a URL as linked (the frontier stores its canonical form).
    assert sorted(canonicalize_url(i["url"]) for i in items) == sorted(
        canonicalize_url(u) for u in web.expected_urls
    )
    assert all(i["status"] == 200 for i in items)
    fetched = page_counts(web.log)
    assert sorted(canonicalize_url(u) for u in fetched) == sorted(
        canonicalize_url(u) for u in web.expected_urls
    )
    assert set(fetched.values()) == {1}
    text = log.read_text()
    assert "'finish_reason': 'finished'" in text
    assert not any(k.startswith("frontier/") for k in stats_of(log))
    for name in FRONTIER_ONLY:  # Scrapy logs a NotConfigured middleware with its reason
        assert f"Disabled middlewares.{name}: SCHEDULER is not the crawlproject frontier" in text
