"""Components that fail on chosen paths (any host), for
tests/test_lease_ends_crawl.py: a downloader middleware raising in
``process_request``, ``process_response`` and ``process_exception``, a spider
middleware raising in ``process_spider_input``, an item pipeline dropping an
item. Each stands for a user's component, or Scrapy's own, failing there."""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.exceptions import DropItem
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached


class DownloadBroke(Exception):
    """What the middleware's process_request raises on ``/fail-exception``,
    for its own process_exception to fail on."""


def _path(request: Request) -> str:
    return urlparse_cached(request).path


class FailingDownloaderMiddleware:
    def process_request(self, request: Request) -> None:
        if _path(request) == "/fail-request":
            raise ValueError("process_request failed")
        if _path(request) == "/fail-exception":
            raise DownloadBroke("a download error")

    def process_response(self, request: Request, response: Response) -> Response:
        if _path(request) in ("/fail-response", "/errback-raises"):
            raise RuntimeError("process_response failed")
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        if isinstance(exception, DownloadBroke):
            raise RuntimeError("process_exception failed")


class FailingSpiderMiddleware:
    def process_spider_input(self, response: Response) -> None:
        if response.request is not None and _path(response.request) == "/fail-spider-input":
            raise ValueError("process_spider_input failed")


class DroppingPipeline:
    def process_item(self, item: Any) -> Any:
        if isinstance(item, dict) and str(item.get("url", "")).endswith("/drop-item"):
            raise DropItem("dropped by the test pipeline")
        return item
