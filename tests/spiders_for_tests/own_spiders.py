"""Spiders as a Scrapy user writes them (no make_seed_request, no errback,
private callbacks, cb_kwargs, dict items): the frontier must store, seed and
crawl them as it does the ``web`` spider."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from scrapy import Request, Spider
from scrapy.http import Response


class TaggedRequest(Request):
    """A Request subclass of the project, stored by its import path."""


class TutorialSpider(Spider):
    """``-a start=URL,URL`` fills ``start_urls`` (the tutorial's class attribute)."""

    name = "tutorial"

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [u for u in start.split(",") if u]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "kind": "start"}
        for href in response.css("a::attr(href)").getall()[:3]:
            yield response.follow(href, callback=self._parse_page, cb_kwargs={"hop": 1})

    def _parse_page(self, response: Response, hop: int) -> Iterator[Any]:
        yield {"url": response.url, "kind": "page", "hop": hop}
        for href in response.css("a::attr(href)").getall()[:2]:
            yield TaggedRequest(
                response.urljoin(href), callback=self.__parse_deep, cb_kwargs={"hop": hop + 1}
            )

    def __parse_deep(self, response: Response, hop: int) -> Iterator[Any]:
        yield {"url": response.url, "kind": "deep", "hop": hop}


class UnstorableSpider(Spider):
    """Yields, for each of ``-a urls=``, requests the frontier cannot store (a
    lambda callback, an object in meta, a class defined in a function), then
    a storable one of the same URL, which must be crawled."""

    name = "unstorable"

    def __init__(self, urls: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = [u for u in urls.split(",") if u]

    async def start(self) -> AsyncIterator[Request]:
        class LocalRequest(Request):
            pass

        for url in self.urls:
            yield Request(url, callback=lambda response: None)
            yield Request(url, callback=self._parse_kept, meta={"obj": object()})
            yield Request(url, callback=self._parse_kept, meta={"obj": {1, 2}})
            yield LocalRequest(url, callback=self._parse_kept)
        for url in self.urls:
            yield TaggedRequest(
                url, callback=self._parse_kept, cb_kwargs={"n": 7}, meta={"mark": [1, "a"]}
            )

    def _parse_kept(self, response: Response, n: int) -> Iterator[dict[str, Any]]:
        yield {"url": response.url, "n": n, "mark": response.meta["mark"]}


class SlowStartSpider(Spider):
    """A ``start()`` that waits before each URL it yields (seeds read from a
    slow API, a login first): ``-a urls=``, ``-a pause=`` seconds."""

    name = "slow_start"

    def __init__(self, urls: str = "", pause: str = "3", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = [u for u in urls.split(",") if u]
        self.pause = float(pause)

    async def start(self) -> AsyncIterator[Request]:
        for url in self.urls:
            await asyncio.sleep(self.pause)
            yield Request(url)

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url}
        yield from response.follow_all(css="a")


class HeavySpider(Spider):
    """Follows every link of its sites, and each page's callback costs
    ``-a cost=`` seconds of the worker's own time (a blocking wait, as a
    CPU-heavy parse holds the worker): a worker that cannot keep up."""

    name = "heavy"

    def __init__(self, start: str = "", cost: str = "0.2", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [u for u in start.split(",") if u]
        self.cost = float(cost)

    def parse(self, response: Response) -> Iterator[Any]:
        time.sleep(self.cost)
        yield {"url": response.url}
        yield from response.follow_all(css="a")
