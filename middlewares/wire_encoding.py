"""Remember how a response's body was encoded on the wire, for the WARC record.

Scrapy's HttpCompressionMiddleware (590) decodes gzip/deflate/br/zstd bodies
and deletes the ``Content-Encoding`` header. The stored record keeps the body
decoded (as Common Crawl's files do) but should still say how it was sent:
this middleware, nearer the downloader (595: responses pass from high to low
order), copies the header into ``request.meta["crawl_wire_encoding"]`` before
the decoding; the storage pipeline writes it as ``X-Crawler-Content-Encoding``
when the header is gone from the response it stores.

Off with the storage pipeline (``CRAWL_STORE_ENABLED``): no one would read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawlproject.component_off import switched_off
from crawlproject.setting_values import crawl_setting
from crawlproject.store.config import WIRE_ENCODING_META_KEY

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class WireEncodingMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WireEncodingMiddleware:
        if not crawl_setting(crawler.settings, "CRAWL_STORE_ENABLED"):
            raise switched_off(
                cls, crawler.settings, "CRAWL_STORE_ENABLED is off", "CRAWL_STORE_ENABLED"
            )
        return cls()

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        encodings = response.headers.getlist("Content-Encoding")
        if encodings:
            request.meta[WIRE_ENCODING_META_KEY] = b", ".join(encodings).decode("latin-1")
        else:
            # A redirect copies meta to the next request: no stale value from a hop.
            request.meta.pop(WIRE_ENCODING_META_KEY, None)
        return response
