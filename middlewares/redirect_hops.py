"""Archive each redirect's 3xx answer when it is received, as Heritrix does.

Scrapy's RedirectMiddleware (600) replaces a 3xx with a new request for its
Location: the 3xx never reaches the spider, and a replay tool looking up the
URL as linked would find nothing. This middleware sits just above it (605:
responses pass from high to low order, so it sees the 3xx first; the redirect
loop check, 610, has already run) and, for each 3xx RedirectMiddleware will
follow, builds a bounded hop (crawlproject/store/hops.py) and sends it with
the ``redirect_received`` signal (crawlproject/store/signals.py). The storage
pipeline writes it to the WARC file before this returns, so the 3xx is
archived whatever becomes of its target: already crawled (the frontier drops
the next request as seen), failed, a duplicate or not stored; and its record
comes before its target's. Nothing is added to the next request, so the
frontier's Redis holds no more per redirect.

The body is still as sent (HttpCompressionMiddleware, 590, runs later): the
hop module decodes a small gzip or deflate body itself.

Off with the storage pipeline (``CRAWL_STORE_ENABLED``) and for the object
format (``CRAWL_STORE_FORMAT = "object"``), which does not archive redirects.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from w3lib.url import safe_url_string

from crawlproject.component_off import switched_off
from crawlproject.limits import REDIRECT_STATUSES
from crawlproject.setting_values import crawl_setting
from crawlproject.store.config import STORE_FORMAT_OBJECT
from crawlproject.store.hops import build_hop
from crawlproject.store.signals import redirect_received
from crawlproject.store.warc import header_lines

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class RedirectHopsMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler  # for the spider's handle_httpstatus_list, as RedirectMiddleware

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedirectHopsMiddleware:
        settings = crawler.settings
        if not crawl_setting(settings, "CRAWL_STORE_ENABLED"):
            raise switched_off(cls, settings, "CRAWL_STORE_ENABLED is off", "CRAWL_STORE_ENABLED")
        if str(crawl_setting(settings, "CRAWL_STORE_FORMAT")).strip().lower() == (
            STORE_FORMAT_OBJECT
        ):
            raise switched_off(
                cls, settings, "the object format stores no redirects", "CRAWL_STORE_FORMAT"
            )
        if not settings.getbool("REDIRECT_ENABLED"):
            raise switched_off(cls, settings, "REDIRECT_ENABLED is off", "REDIRECT_ENABLED")
        return cls(crawler)

    async def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        if self._will_follow(request, response):
            ip = response.ip_address
            hop = build_hop(
                url=request.url,
                status=response.status,
                headers=header_lines(response.headers),
                body=response.body,
                fetched_at=datetime.now(UTC),
                method=request.method,
                request_headers=header_lines(request.headers),
                ip=str(ip) if ip is not None else None,
            )
            # Awaited: the redirect is followed once its record is written (it
            # waits while a full spool pauses the worker). A worker killed
            # before the URL's lease is acked leaves it to be fetched again,
            # the 3xx then archived twice: acceptable, as for a page.
            await self.crawler.signals.send_catch_log_async(signal=redirect_received, hop=hop)
        return response

    def _will_follow(self, request: Request, response: Response) -> bool:
        """RedirectMiddleware.process_response's own tests (Scrapy 2.19): a hop
        is only archived for a redirect that gets a next request."""
        meta = request.meta
        if response.status not in REDIRECT_STATUSES or b"Location" not in response.headers:
            return False
        if meta.get("dont_redirect") or meta.get("handle_httpstatus_all"):
            return False
        if response.status in meta.get("handle_httpstatus_list", ()):
            return False
        if response.status in getattr(self.crawler.spider, "handle_httpstatus_list", ()):
            return False
        location = response.headers[b"Location"] or b""
        if location.startswith(b"//"):
            return urlsplit(request.url).scheme in ("http", "https")
        try:
            target = urljoin(request.url, safe_url_string(location))
            return urlsplit(target).scheme in ("http", "https")
        except ValueError:
            return False
