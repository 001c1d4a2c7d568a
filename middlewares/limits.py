"""Per-request limits Scrapy does not apply by itself (crawlproject/limits.py).

* Redirect loops end at their first repeat (``limits/redirect_loop``). Scrapy's
  RedirectMiddleware only stops a loop when REDIRECT_MAX_TIMES is used up,
  after fetching the loop's URLs again and again; and as each redirect goes
  through the frontier, a loop over two URLs would end silently in its seen
  set. This middleware sits just above RedirectMiddleware (600), so it sees
  each 3xx first: a Location that leads back into the request's own redirect
  chain is raised as :class:`RedirectLoop` (an IgnoreRequest), and the
  spider's errback counts it, logs it, records the fetch and finishes its lease.
* Sitemap files may be larger than a page: sitemaps.org allows 50 MB
  uncompressed, over the project's DOWNLOAD_MAXSIZE. Requests for sitemaps
  (``meta["crawl_sitemap"]``) get SITEMAP_MAX_BYTES as their own limit (both
  as sent and decompressed) unless DOWNLOAD_MAXSIZE is larger or off.
"""

from __future__ import annotations

import logging
from typing import Self

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.http import Response

from crawlproject.limits import (
    REDIRECT_STATUSES,
    SITEMAP_MAX_BYTES,
    SITEMAP_META_KEY,
    RedirectLoop,
    redirect_loop_target,
)

logger = logging.getLogger(__name__)


class LimitsMiddleware:
    def __init__(self, download_maxsize: int) -> None:
        # 0 (no limit) stays 0; a larger project limit is kept.
        self.sitemap_maxsize = max(download_maxsize, SITEMAP_MAX_BYTES) if download_maxsize else 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler.settings.getint("DOWNLOAD_MAXSIZE"))

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if request.meta.get(SITEMAP_META_KEY) and "download_maxsize" not in request.meta:
            request.meta["download_maxsize"] = self.sitemap_maxsize

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        if response.status not in REDIRECT_STATUSES or request.meta.get("dont_redirect"):
            return response
        if response.status in request.meta.get("handle_httpstatus_list", ()):
            return response  # the callback wants the 3xx itself
        location = response.headers.get(b"Location")
        target = redirect_loop_target(
            request.url,
            list(request.meta.get("redirect_urls") or ()),
            location.decode("latin-1") if location else None,
        )
        if target is None:
            return response
        first = (request.meta.get("redirect_urls") or [request.url])[0]
        logger.debug(
            "Redirect loop: %s leads back to %s (chain from %s)", request.url, target, first
        )
        raise RedirectLoop(f"redirect loop back to {target}")
