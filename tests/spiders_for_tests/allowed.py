"""A spider of one's own that keeps to its ``allowed_domains`` (Scrapy's
offsite rule), as a user writes one: its hosts are the operator's, crawled
whole, not budgeted (crawlproject/frontier/store/operator_scope.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Request, Spider
from scrapy.http import Response


class AllowedSpider(Spider):
    name = "allowed"

    def __init__(
        self, seeds: str = "", allowed: str = "", crawl: str = "allowed", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.start_urls = [url for url in seeds.split(",") if url]
        self.allowed_domains = [d for d in allowed.split(",") if d]
        self.crawl_name = crawl

    def parse(self, response: Response) -> Iterator[Request | dict[str, Any]]:
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)
        yield {"url": response.url}
