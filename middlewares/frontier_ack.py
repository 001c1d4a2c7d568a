"""Tell the frontier when a leased URL is finished, so its lease can be dropped.

A URL's lease is acknowledged only once its outcome is final *and* the links
it produced were handed to the scheduler; until then a dead worker's URL comes
back. Both middlewares sit next to the engine (lowest order), so they see the
final outcome after redirects, retries and HTTP-error filtering:

* the spider middleware: the callback's output was fully consumed (or raised)
  and every item it produced has left the item pipelines (Scrapy's
  ``item_scraped`` / ``item_dropped`` / ``item_error`` signals): Scrapy runs the
  pipelines after the output is consumed, so acking at the end of the output
  alone would let a killed worker lose a page it fetched but never stored;
* the downloader middleware: the download failed for good (no middleware
  turned the exception into a retry or a response).

What neither sees (an exception raised in a downloader middleware's
``process_response`` or ``process_exception``, an errback that raises: Scrapy
sends those past both, and only logs them when the request has no errback)
ends when the engine is done with the request
(crawlproject/frontier/scrapy_glue/engine_hooks.py), whatever the spider.

An item a pipeline could not save for a reason not its own (it raised
:class:`~crawlproject.frontier.outcomes.ItemNotSaved`: a failing disk, a
database down) does not finish its page: the URL goes back to the frontier
and the worker stops (close reason ``item_not_saved``, exit status 1), since
what it fetched next would not be saved either. Any other item error finishes
the URL as before: a poison item must not be fetched again and again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from itemadapter import is_item
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from twisted.python.failure import Failure

from crawlproject.frontier.basics.outcomes import ITEM_NOT_SAVED, ItemNotSaved
from crawlproject.frontier.scrapy_glue.frontier_lookup import frontier_of, require_frontier

logger = logging.getLogger(__name__)


class _LeaseTracker(Protocol):
    def scraping(self, request: Request) -> None: ...
    def done(self, request: Request, outcome: str) -> None: ...
    def returned(self, request: Request) -> None: ...
    def failed(self, request: Request, exception: BaseException | None) -> None: ...


class _Base:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @property
    def tracker(self) -> _LeaseTracker:
        return frontier_of(self.crawler).leases


class FrontierAckSpiderMiddleware(_Base):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        # Per response (by identity) whose output is still being consumed or
        # whose items are still in the pipelines: items not yet out of them.
        # An entry lives as long as its page's processing: bounded by
        # CONCURRENT_REQUESTS and CONCURRENT_ITEMS.
        self._items_in_pipelines: dict[int, int] = {}
        self._output_done: set[int] = set()
        # Responses with an item that raised ItemNotSaved: returned, not acked.
        self._not_saved: set[int] = set()
        self._stopping: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierAckSpiderMiddleware:
        require_frontier(crawler)
        middleware = cls(crawler)
        for signal in (signals.item_scraped, signals.item_dropped):
            crawler.signals.connect(middleware._item_left_pipelines, signal=signal)
        crawler.signals.connect(middleware._item_failed, signal=signals.item_error)
        return middleware

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        # While the spider's start() is being read (lazily, as the engine has
        # room) the crawl is not over, however long it takes to yield.
        end = frontier_of(self.crawler).end
        end.starts_running = True
        try:
            async for obj in start:
                yield obj
        finally:
            end.starts_running = False

    def process_spider_input(self, response: Response) -> None:
        if response.request is not None:
            self.tracker.scraping(response.request)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        key = id(response)
        self._items_in_pipelines.setdefault(key, 0)
        try:
            async for obj in result:
                if not isinstance(obj, Request) and is_item(obj):
                    # Counted before it leaves: its pipelines may finish at once.
                    self._items_in_pipelines[key] += 1
                yield obj
        finally:
            self._output_done.add(key)
            self._ack_if_finished(response)

    def _item_left_pipelines(self, response: object = None, **_: Any) -> None:
        if not isinstance(response, Response):
            return  # an item of no response (start items, download errbacks)
        key = id(response)
        if key in self._items_in_pipelines:
            self._items_in_pipelines[key] -= 1
            self._ack_if_finished(response)

    def _item_failed(self, response: object = None, failure: object = None, **_: Any) -> None:
        if isinstance(failure, Failure) and failure.check(ItemNotSaved):
            # Close before the lease is returned: the close task runs ahead of
            # the write loop's wake-up, so the engine stops starting requests
            # before the URL is back in Redis, where this worker could claim it.
            self._stop_worker(response, failure.value)
            if isinstance(response, Response) and id(response) in self._items_in_pipelines:
                self._not_saved.add(id(response))
        self._item_left_pipelines(response)

    def _stop_worker(self, response: object, cause: BaseException | None) -> None:
        url = response.url if isinstance(response, Response) else "(no page)"
        engine = self.crawler.engine
        if self._stopping is not None or engine is None:
            logger.warning("Not saved: an item of %s (%s); the page goes back to the frontier",
                           url, cause)  # fmt: skip
            return
        logger.error(
            "Stopping the worker (%s): an item of %s could not be saved (%s); the page goes "
            "back to the frontier, for a worker that can save it",
            ITEM_NOT_SAVED, url, cause,
        )  # fmt: skip
        self._stopping = asyncio.get_running_loop().create_task(self._close_spider())

    async def _close_spider(self) -> None:
        engine = self.crawler.engine
        assert engine is not None
        try:
            await engine.close_spider_async(reason=ITEM_NOT_SAVED)
        except Exception:
            logger.exception("Could not close the spider (%s)", ITEM_NOT_SAVED)

    def _ack_if_finished(self, response: Response) -> None:
        key = id(response)
        if key not in self._output_done or self._items_in_pipelines.get(key, 0) > 0:
            return
        self._output_done.discard(key)
        self._items_in_pipelines.pop(key, None)
        not_saved = key in self._not_saved
        self._not_saved.discard(key)
        if response.request is None:
            return
        if not_saved:
            self.tracker.returned(response.request)
        else:
            self.tracker.done(response.request, "scraped")

    def process_spider_exception(
        self, response: Response, exception: Exception
    ) -> Iterable[Any] | None:
        if response.request is not None:
            self.tracker.done(response.request, "spider_error")
        return None


class FrontierAckDownloaderMiddleware(_Base):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierAckDownloaderMiddleware:
        require_frontier(crawler)
        return cls(crawler)

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        self.tracker.failed(request, exception)
        return None
