"""Drops the links robots.txt forbids, as the spider yields them, when this
worker holds the rules of their origin (issue 43).

A forbidden link that reached the frontier was claimed like any URL: it held
its host's one politeness slot until the robots.txt middleware refused it at
download time, a claim and a release for nothing (and, before 96de634, often a
whole delay of the host's). Real sites link disallowed paths from every page
(a log-in, a cart, a share link of each page's own), so on a web-like farm a
third of the claims were such URLs. The rules of a page's own host are always
in the worker's cache when its links come (the page was checked against them),
so its forbidden links never reach the frontier; a link to a host whose rules
this worker does not hold goes on, and the download-time check stays the rule.

Counted in ``robotstxt/forbidden_links``. Order 965: below
KnownLinksMiddleware (970), so only links this worker did not take before are
checked. Off (NotConfigured) with ``CRAWL_ROBOTS_OBEY = False`` or without the
frontier; a request with ``dont_obey_robotstxt`` in its meta passes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.http import Response

from crawlproject.component_off import switched_off
from crawlproject.frontier.scrapy_glue.frontier_lookup import require_frontier
from crawlproject.robots.config import RobotsConfig
from middlewares.robotstxt import RobotsTxtMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class RobotsLinksMiddleware:
    def __init__(self, crawler: Crawler, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.stats = stats
        self._forbids: Callable[[str], bool] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsLinksMiddleware:
        if not RobotsConfig.from_settings(crawler.settings).obey:
            why = "CRAWL_ROBOTS_OBEY is off"
            raise switched_off(cls, crawler.settings, why, "CRAWL_ROBOTS_OBEY")
        require_frontier(crawler)
        assert crawler.stats is not None
        return cls(crawler, crawler.stats)

    def forbids(self) -> Callable[[str], bool] | None:
        """The robots middleware's test of its cached rules, once the engine's
        downloader is built; None if that middleware is off."""
        if self._forbids is None and self.crawler.engine is not None:
            for mw in self.crawler.engine.downloader.middleware.middlewares:
                if isinstance(mw, RobotsTxtMiddleware):
                    self._forbids = mw.forbids
        return self._forbids

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        forbids = self.forbids()
        async for obj in result:
            if (
                forbids is not None
                and isinstance(obj, Request)
                and not obj.meta.get("dont_obey_robotstxt")
                and forbids(obj.url)
            ):
                self.stats.inc_value("robotstxt/forbidden_links")
                continue
            yield obj
