"""Whether a crawl runs on the frontier at all: its ``SCHEDULER`` is the
frontier scheduler (components that only work on the frontier raise
NotConfigured otherwise; the politeness add-on leaves Scrapy's own scheduler
alone).

Told by a mark the scheduler class carries, so that settings code (the
politeness add-on, the frontier's settings) can ask without importing the
scheduler, which sits rooms above it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class FrontierMark:
    """A base of :class:`crawlproject.frontier.scrapy_glue.scheduler.FrontierScheduler`
    (and of any subclass of it): the frontier scheduler's mark."""


def is_frontier(obj: object) -> bool:
    """Whether ``obj`` (a scheduler or its class) is the FrontierScheduler.

    Scrapy's BaseSchedulerMeta makes isinstance/issubclass duck-typed (true for
    any scheduler), so this looks at the class hierarchy itself."""
    cls = obj if isinstance(obj, type) else type(obj)
    return FrontierMark in cls.__mro__


def require_frontier(crawler: Crawler) -> None:
    """For components that only work on the frontier: NotConfigured otherwise."""
    if not is_frontier(load_object(crawler.settings["SCHEDULER"])):
        raise NotConfigured("SCHEDULER is not the crawlproject frontier")
