"""Spiders that set their own politeness the way Scrapy's tutorial and docs
teach (a ``DOWNLOAD_DELAY`` in ``custom_settings``, the ``download_delay``
class attribute): the frontier takes it as the fleet's per-host delay
(crawlproject/frontier/crawl/scrapy_politeness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from scrapy import Spider
from scrapy.http import Response

DELAY = 0.3


class PoliteTutorialSpider(Spider):
    """``-a start=URL,URL``; follows every link of its sites."""

    name = "polite_tutorial"
    custom_settings: ClassVar[dict[str, Any]] = {"DOWNLOAD_DELAY": DELAY}

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [u for u in start.split(",") if u]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url}
        yield from response.follow_all(css="a::attr(href)", callback=self.parse)


class PoliteAttributeSpider(PoliteTutorialSpider):
    """The same, with the older class attribute instead of the setting."""

    name = "polite_attribute"
    custom_settings: ClassVar[dict[str, Any]] = {}
    download_delay = DELAY
