"""An item pipeline that holds each item a while, so a test can kill a worker
while a fetched page is still in the pipelines (before it is stored)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class SlowPipeline:
    def __init__(self, hold_seconds: float) -> None:
        self.hold_seconds = hold_seconds

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SlowPipeline:
        return cls(crawler.settings.getfloat("TEST_PIPELINE_HOLD_SECONDS", 30.0))

    async def process_item(self, item: Any) -> Any:
        logger.info("Holding %s in the pipelines", item.get("url"))
        await asyncio.sleep(self.hold_seconds)
        return item
