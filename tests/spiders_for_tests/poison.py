"""A downloader middleware that kills its worker process (``os._exit``) when it
is about to fetch one chosen URL: a stand-in for a URL whose fetch or page
crashes a parser or exhausts memory, so a test can watch it kill worker after
worker."""

from __future__ import annotations

import asyncio
import logging
import os

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

logger = logging.getLogger(__name__)

POISON_EXIT_CODE = 3  # not Scrapy's 1, so a test tells this death from a failed crawl


class ExitOnUrlMiddleware:
    def __init__(self, url: str, wait_seconds: float) -> None:
        self.url = url
        self.wait_seconds = wait_seconds

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ExitOnUrlMiddleware:
        url = crawler.settings.get("TEST_POISON_URL")
        if not url:
            raise NotConfigured("TEST_POISON_URL not set")
        return cls(url, crawler.settings.getfloat("TEST_POISON_WAIT_SECONDS", 1.0))

    async def process_request(self, request: Request) -> Response | None:
        if request.url.partition("#")[0] != self.url:  # a link's fragment is kept
            return None
        # Before the fetch its lease holds the worker's only fetch slot
        # (CONCURRENT_REQUESTS=1), so nothing new is claimed while the pages
        # before it finish and their acks reach Redis: the worker dies holding
        # this URL alone.
        logger.warning("Poison URL %s: exiting in %.1f s", self.url, self.wait_seconds)
        await asyncio.sleep(self.wait_seconds)
        os._exit(POISON_EXIT_CODE)
