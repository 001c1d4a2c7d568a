"""A spider written for scrapy-playwright, as its README teaches: its download
handler in custom_settings, ``meta={"playwright": True}`` and page methods.
tests/test_render_browser.py runs it unchanged through the shared frontier."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy_playwright.page import PageMethod


def _meta() -> dict[str, Any]:
    return {
        "playwright": True,
        "playwright_page_methods": [PageMethod("wait_for_selector", "#app h1")],
    }


class PlaywrightAppSpider(scrapy.Spider):
    name = "playwright_app"
    custom_settings = {
        "DOWNLOAD_HANDLERS": {
            "http": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
            "https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
        },
        "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
    }

    def __init__(self, base: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request(self.base + "/", meta=_meta())

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {"url": response.url, "title": response.css("#app h1::text").get()}
        for href in response.css("#app a::attr(href)").getall():
            yield response.follow(href, meta=_meta())
