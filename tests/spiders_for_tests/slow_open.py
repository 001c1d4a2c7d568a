"""An item pipeline slow to open (a store that takes a while to reach), so a
test can stop a worker while its spider is still opening."""

from __future__ import annotations

import asyncio
import logging

from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class SlowOpenPipeline:
    def __init__(self, open_seconds: float) -> None:
        self.open_seconds = open_seconds

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SlowOpenPipeline:
        return cls(crawler.settings.getfloat("TEST_PIPELINE_OPEN_SECONDS", 5.0))

    async def open_spider(self) -> None:
        logger.info("Pipeline opening slowly (%.1f s)", self.open_seconds)
        await asyncio.sleep(self.open_seconds)

    def process_item(self, item: object) -> object:
        return item
