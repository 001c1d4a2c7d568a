"""How components find the running crawl's frontier scheduler, and whether
the crawl runs on it at all (components that only work on the frontier raise
NotConfigured otherwise: ``is_frontier`` and ``require_frontier``, from
crawl/on_frontier.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from crawlproject.frontier.crawl.on_frontier import is_frontier, require_frontier
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler, frontier_closing

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawlproject.frontier.crawl.crawl_redis import CrawlRedis

__all__ = ["crawl_redis_of", "frontier_closing", "frontier_of", "is_frontier", "require_frontier"]


def frontier_of(crawler: Crawler) -> FrontierScheduler:
    """The running crawl's FrontierScheduler (for components that require it)."""
    engine = crawler.engine
    assert engine is not None and is_frontier(engine.scheduler)
    return cast("FrontierScheduler", engine.scheduler)


def crawl_redis_of(crawler: Crawler) -> CrawlRedis | None:
    """The crawl's Redis (connection, keys, worker id) for components that
    keep state there; None until the frontier is open (or if it could not
    open: its Redis may be away, and the failure is said once, by the scheduler)."""
    scheduler = frontier_of(crawler)
    return None if scheduler.frontier is None else scheduler.crawl_redis
