"""Spiders as Scrapy's tutorial writes them, for Scrapy's own crawl-ending,
depth and ordering settings (CLOSESPIDER_*, DEPTH_LIMIT, DEPTH_PRIORITY,
Request.priority, JOBDIR) run through the frontier."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Request, Spider
from scrapy.http import Response


class FollowSpider(Spider):
    """Follows every link (``-a start=URL,URL``); one item a page, with its
    depth and, under JOBDIR, the pages this worker's ``spider.state`` counted
    so far (Scrapy's SpiderState keeps it across runs)."""

    name = "follow"

    def __init__(self, start: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [u for u in start.split(",") if u]

    def parse(self, response: Response) -> Iterator[Any]:
        state = getattr(self, "state", None)  # set by SpiderState only when JOBDIR is
        if state is not None:
            state["pages"] = state.get("pages", 0) + 1
        yield {
            "url": response.url,
            "depth": response.meta.get("depth", 0),
            "state_pages": None if state is None else state["pages"],
        }
        yield from response.follow_all(css="a::attr(href)", callback=self.parse)


class PrioritySpider(Spider):
    """From its start page (``-a start=URL``), asks for ``/p/<n>`` with
    ``Request(priority=...)`` from ``-a priorities=p1,p2,...`` (page n gets
    the n-th), in that order; those pages yield an item and no links."""

    name = "priority_order"

    def __init__(self, start: str = "", priorities: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start]
        self.priorities = [int(p) for p in priorities.split(",") if p]

    def parse(self, response: Response) -> Iterator[Any]:
        for n, priority in enumerate(self.priorities, start=1):
            yield Request(response.urljoin(f"/p/{n}"), callback=self.parse_leaf, priority=priority)

    def parse_leaf(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "priority": response.request.priority}
