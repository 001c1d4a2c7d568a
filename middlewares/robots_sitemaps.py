"""The ``Sitemap:`` lines of a robots.txt the fleet fetched, queued as
requests for the spider's ``parse_sitemap`` (robotstxt.py calls
:meth:`SitemapSeeds.seed` after each fetch)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from scrapy import Request, Spider

from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY
from crawlproject.frontier.basics.urls import DEFAULT_PORTS
from crawlproject.limits import SITEMAP_META_KEY

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from crawlproject.robots.config import RobotsConfig
    from crawlproject.robots.policy import RobotsRules

logger = logging.getLogger("middlewares.robotstxt")  # where its lines were

SITEMAPS_PER_ROBOTS_MAX = 50


class SitemapSeeds:
    def __init__(self, crawler: Crawler, config: RobotsConfig, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self._no_callback_said = False

    def seed(self, origin: str, rules: RobotsRules, request: Request) -> None:
        """Queues the ``Sitemap:`` lines of ``origin``'s robots.txt (and its
        /sitemap.xml if CRAWL_ROBOTS_SITEMAP_XML), fetched for ``request``,
        under that request's scope root, for the spider's ``parse_sitemap``."""
        if not self.config.sitemaps:
            return
        urls = rules.sitemaps()
        if self.config.sitemap_xml:
            urls.append(origin + "/sitemap.xml")
        if not urls:
            return
        spider: Spider | None = self.crawler.spider
        callback = getattr(spider, "parse_sitemap", None)
        engine = self.crawler.engine
        if callback is None or engine is None:
            if not self._no_callback_said:
                self._no_callback_said = True
                logger.info("The spider has no parse_sitemap method: Sitemap: lines are ignored")
            return
        errback = getattr(spider, "on_error", None)
        for url in urls[:SITEMAPS_PER_ROBOTS_MAX]:
            if urlsplit(url).scheme not in DEFAULT_PORTS:
                self.stats.inc_value("robotstxt/sitemap_bad_url")
                continue
            engine.crawl(
                Request(
                    url,
                    callback=callback,
                    errback=errback,
                    meta={
                        SCOPE_META_KEY: request.meta.get(SCOPE_META_KEY),
                        SITEMAP_META_KEY: True,
                    },
                )
            )
            self.stats.inc_value("robotstxt/sitemaps")
