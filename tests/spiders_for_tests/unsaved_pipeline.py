"""An item pipeline that cannot save one chosen page (``TEST_NOT_SAVED_URL``):
it raises ItemNotSaved for it, as a user's pipeline whose database is down would."""

from __future__ import annotations

from typing import Any

from scrapy.crawler import Crawler

from crawlproject.frontier.basics.outcomes import ItemNotSaved


class UnsavedPipeline:
    def __init__(self, url: str) -> None:
        self.url = url

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UnsavedPipeline:
        return cls(crawler.settings.get("TEST_NOT_SAVED_URL", ""))

    async def process_item(self, item: Any) -> Any:
        url = str(item.get("url"))
        if url == self.url:
            raise ItemNotSaved(f"could not save {url}: the test database is down")
        return item
