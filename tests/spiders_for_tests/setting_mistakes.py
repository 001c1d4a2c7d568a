"""Spiders whose ``custom_settings`` hold the mistakes of a first hour
(tests/test_setting_mistakes.py): a misspelt name, a value that cannot be read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from scrapy import Spider
from scrapy.http import Response


class MisspeltSpider(Spider):
    """Follows every link of ``-a start=URL``; its delay setting is misspelt,
    so the default delay applies (and a WARNING says so)."""

    name = "misspelt"
    custom_settings: ClassVar[dict[str, Any]] = {"CRAWL_HOST_DELAI": 0.05}

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [u for u in start.split(",") if u]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url}
        yield from response.follow_all(css="a::attr(href)", callback=self.parse)


class UnreadableSpider(MisspeltSpider):
    """A delay no getfloat can read, given in custom_settings."""

    name = "unreadable"
    custom_settings: ClassVar[dict[str, Any]] = {"CRAWL_HOST_DELAY": "one second"}
