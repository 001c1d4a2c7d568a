"""``plainweb``: follow every link within the seeds' hosts; one item a page.

The spider a Scrapy user writes for "crawl these sites": Scrapy's
LinkExtractor, its OffsiteMiddleware (``allowed_domains``), its duplicate
filter and scheduler; an item of URL, status and title for each page (the
benchmark writes them to a JSON lines feed). The seeds go through the duplicate
filter too (``start_urls`` would not filter them, and each host's ``/`` would
be fetched twice): both sides fetch the same pages.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor


class PlainWebSpider(Spider):
    name = "plainweb"

    def __init__(self, seeds: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [u.strip() for u in seeds.split(",") if u.strip()]
        self.allowed_domains = sorted({urlsplit(u).hostname or "" for u in self.start_urls})
        self.links = LinkExtractor()

    async def start(self) -> AsyncIterator[Request]:
        for url in self.start_urls:
            yield Request(url, callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[dict[str, Any] | Request]:
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(),
        }
        for link in self.links.extract_links(response):
            yield Request(link.url, callback=self.parse)
