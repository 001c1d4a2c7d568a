"""A link robots.txt forbids never takes its host's slot to be refused when the
worker holds that host's rules (middlewares/robots_links.py, issue 43): a page's
own host's always are, so the disallowed links every page of a real site
carries (a log-in, a share link of each page's own) never reach the frontier."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb, page_counts
from testkit.web_like import robots_txt

DELAY = 0.05
PAGES = 8


def test_a_pages_forbidden_links_never_reach_the_frontier(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=2,
        pages=PAGES,
        links=3,
        cross_links=0,
        special={h: {"/robots.txt": {"body": robots_txt(DELAY)}} for h in (1, 2)},
        site_links={"/private/login": 1, "/private/share?page={k}": 1},
    )
    settings = {
        "CRAWL_HOST_DELAY": DELAY,
        "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
        "CRAWL_IDLE_POLL_SECONDS": 0.2,
        "LOG_LEVEL": "INFO",
    }
    proc = start_worker(REPO_ROOT, redis_url, "links", web.seeds, settings, tmp_path / "w.log")
    wait_all([proc], timeout=120)
    assert web.expected_urls <= set(page_counts(web.log))
    assert not [r.path for r in web.log if r.path.startswith("/private/")]
    stats = stats_of(proc.log_path)
    assert stats.get("robotstxt/forbidden", 0) == 0, stats  # no such URL was ever claimed
    # Every page's own share link, and the log-in link at least once a page.
    assert stats["robotstxt/forbidden_links"] >= 2 * PAGES * 2, stats
