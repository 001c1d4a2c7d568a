"""Scrapy's generic spiders as its documentation writes them: a CrawlSpider
with rules and a link extractor, a SitemapSpider with sitemap rules. Their
requests carry private callbacks (``_callback``, ``_parse_sitemap``) and the
rule's index in meta, which the frontier must store and give back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Spider
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule, SitemapSpider


class RulesSpider(CrawlSpider):
    """``-a start=URL,URL``: follows every ``/p/`` link of its sites and makes
    an item of each such page."""

    name = "rules"
    rules = (Rule(LinkExtractor(allow=r"/p/"), callback="parse_item", follow=True),)

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [u for u in start.split(",") if u]

    def parse_item(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"url": response.url, "rule": response.meta.get("rule")}


class MapSpider(SitemapSpider):
    """``-a maps=URL,URL``: the pages its sitemaps list under ``/p/``."""

    name = "sitemap_pages"
    sitemap_rules = [("/p/", "parse_page")]

    def __init__(self, maps: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sitemap_urls = [u for u in maps.split(",") if u]

    def parse_page(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"url": response.url}


class ScopedSpider(Spider):
    """``-a start=URL`` and ``-a domains=a,b``: Scrapy's ``allowed_domains``
    (its OffsiteMiddleware drops requests to other hosts); follows every link."""

    name = "scoped"

    def __init__(self, start: str = "", domains: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [u for u in start.split(",") if u]
        self.allowed_domains = [d for d in domains.split(",") if d]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url}
        yield from response.follow_all(css="a")
