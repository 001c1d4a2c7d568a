"""How components find the running crawl's frontier scheduler, and whether
the crawl runs on it at all (components that only work on the frontier raise
NotConfigured otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawlproject.frontier.crawl.crawl_redis import CrawlRedis
    from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler

# Signal sent when the frontier scheduler starts closing, while its Redis is
# still open (no arguments). Connect with crawler.signals.connect(handler,
# signal=frontier_closing).
frontier_closing = object()


def is_frontier(obj: object) -> bool:
    """Whether ``obj`` (a scheduler or its class) is the FrontierScheduler.

    Scrapy's BaseSchedulerMeta makes isinstance/issubclass duck-typed (true for
    any scheduler), so this looks at the class hierarchy itself."""
    from crawlproject.frontier.scrapy_glue.scheduler import (
        FrontierScheduler,  # it imports this module
    )

    cls = obj if isinstance(obj, type) else type(obj)
    return FrontierScheduler in cls.__mro__


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


def require_frontier(crawler: Crawler) -> None:
    """For components that only work on the frontier: NotConfigured otherwise."""
    if not is_frontier(load_object(crawler.settings["SCHEDULER"])):
        raise NotConfigured("SCHEDULER is not the crawlproject frontier")
