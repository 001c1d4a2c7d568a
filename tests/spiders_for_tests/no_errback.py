"""A spider as Scrapy's tutorial teaches it: ``start_urls``, a ``parse`` that
follows every link and yields a dict per page, no errback (but on the links
to ``/errback-raises*``, whose errback itself raises). Nothing in it knows the
frontier: its leases must end through the engine, whatever fails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Request, Spider
from scrapy.http import Response
from twisted.python.failure import Failure


class NoErrbackSpider(Spider):
    name = "no_errback"

    def __init__(self, seeds: str = "", crawl: str = "no_errback", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [url for url in seeds.split(",") if url]
        self.crawl_name = crawl

    def parse(self, response: Response) -> Iterator[Request | dict[str, Any]]:
        if response.url.endswith("/raise-in-callback"):
            raise ValueError(f"the callback failed on {response.url}")
        for href in response.css("a::attr(href)").getall():
            if "/errback-raises" in href:
                yield response.follow(href, self.parse, errback=self.errback_that_raises)
            else:
                yield response.follow(href, self.parse)
        yield {"url": response.url, "title": response.css("title::text").get()}

    def errback_that_raises(self, failure: Failure) -> None:
        raise RuntimeError(f"the errback failed too: {failure.getErrorMessage()}")
