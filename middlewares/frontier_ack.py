"""Tell the frontier when a leased URL is finished, so its lease can be dropped.

A URL's lease is acknowledged only once its outcome is final *and* the links
it produced were handed to the scheduler; until then a dead worker's URL comes
back. Both middlewares sit next to the engine (lowest order), so they see the
final outcome after redirects, retries and HTTP-error filtering:

* the spider middleware: the callback's output was fully consumed (or raised);
* the downloader middleware: the download failed for good (no middleware
  turned the exception into a retry or a response).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.http import Response

from crawlproject.frontier.scheduler import frontier_of, require_frontier


class _LeaseTracker(Protocol):
    def lease_scraping(self, request: Request) -> None: ...
    def lease_done(self, request: Request, outcome: str) -> None: ...


class _Base:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @property
    def tracker(self) -> _LeaseTracker:
        return frontier_of(self.crawler)


class FrontierAckSpiderMiddleware(_Base):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierAckSpiderMiddleware:
        require_frontier(crawler)
        return cls(crawler)

    def process_spider_input(self, response: Response) -> None:
        if response.request is not None:
            self.tracker.lease_scraping(response.request)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        try:
            async for item in result:
                yield item
        finally:
            if response.request is not None:
                self.tracker.lease_done(response.request, "scraped")

    def process_spider_exception(
        self, response: Response, exception: Exception
    ) -> Iterable[Any] | None:
        if response.request is not None:
            self.tracker.lease_done(response.request, "spider_error")
        return None


class FrontierAckDownloaderMiddleware(_Base):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierAckDownloaderMiddleware:
        require_frontier(crawler)
        return cls(crawler)

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        self.tracker.lease_done(request, "failed")
        return None
