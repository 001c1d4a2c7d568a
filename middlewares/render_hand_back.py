"""A worker without a browser never fetches a page that must be rendered
while a worker with one is in the fleet: it hands it back to the frontier
before the fetch (a downloader middleware, after robots.txt's check, so that
no contact with the host was made for it). The decision is the render
handler's (middlewares/render_handler.py ``hand_back``,
crawlproject/render/fleet.py); raising from the download handler itself
would end the fetch as a contact with the host."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.misc import load_object

from crawlproject.component_off import switched_off
from crawlproject.frontier.basics.request_meta import LEASE_META_KEY
from crawlproject.frontier.scrapy_glue.frontier_lookup import is_frontier
from middlewares.render_handler import RenderDownloadHandler

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class RenderHandBackMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderHandBackMiddleware:
        if not is_frontier(load_object(crawler.settings["SCHEDULER"])):
            why = "pages are handed back to the shared frontier, which this crawl does not use"
            raise switched_off(cls, crawler.settings, why, "SCHEDULER")
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        if LEASE_META_KEY not in request.meta:
            return  # not a claimed URL (robots.txt, a sitemap): nothing to hand back
        handler = RenderDownloadHandler.of(self.crawler)
        if handler is not None:
            await handler.hand_back(request)  # NotFetched: handed back
