"""Requests that ask for a render travel through the shared frontier as data
(a spider middleware, next to the spider).

A spider written for scrapy-playwright puts live objects in ``meta``:
``PageMethod`` objects in ``playwright_page_methods`` (turned into their JSON
forms here, crawlproject/render/page_methods.py, and back into PageMethods by
the download handler), and possibly ``playwright_include_page`` (a Playwright
page handed to the callback) or ``playwright_page_init_callback`` (a function):
those cannot be stored outside the process, nor outlive the worker, so they
are dropped here with one WARNING per key (stat ``render/meta_dropped``). A
page method given as a callable is dropped the same way.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from crawlproject.render.page_methods import LIVE_META_KEYS, NotStorable, to_data

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class RenderRequestsMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        assert crawler.stats is not None
        self.stats = crawler.stats
        self._said: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderRequestsMiddleware:
        return cls(crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for obj in start:
            yield self._storable(obj)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for obj in result:
            yield self._storable(obj)

    def _storable(self, obj: Any) -> Any:
        if not isinstance(obj, Request) or not any(k.startswith("playwright") for k in obj.meta):
            return obj
        meta = obj.meta
        for key in LIVE_META_KEYS:
            if key in meta:
                del meta[key]
                self._drop(key, "it holds a live object, which cannot be stored in the frontier")
        methods = meta.get("playwright_page_methods")
        if methods:
            try:
                meta["playwright_page_methods"] = to_data(methods)
            except NotStorable as exc:
                del meta["playwright_page_methods"]
                self._drop("playwright_page_methods", str(exc))
        return obj

    def _drop(self, key: str, why: str) -> None:
        self.stats.inc_value("render/meta_dropped")
        if key not in self._said:
            self._said.add(key)
            logger.warning(
                "meta[%r] dropped from requests (%s); the page is rendered without it. "
                "Give page methods by name (PageMethod('wait_for_selector', ...)) and read "
                "the page from the response", key, why,
            )  # fmt: skip
