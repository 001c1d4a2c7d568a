"""A user's spider that hands each page's Response to the store in its items
(``crawl_response``: docs/storage.md, "Other spiders"); not ``web``, so the
duplicate filter drops all the items of an exact copy
(``CRAWL_DEDUPE_DROP_ITEMS``) before any pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Spider
from scrapy.http import Response


class ArchivingSpider(Spider):
    """``-a per_page=N``: N items per page (default 1), each carrying the page's
    response; then the page's links."""

    name = "archiving"

    def __init__(self, per_page: str = "1", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.per_page = int(per_page)

    def parse(self, response: Response) -> Iterator[Any]:
        title = response.css("title::text").get()
        for n in range(self.per_page):
            yield {"url": response.url, "title": title, "n": n, "crawl_response": response}
        yield from response.follow_all(css="a")
