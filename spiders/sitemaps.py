"""Reading one sitemap file for the ``web`` spider: its body (plain, or ``.xml.gz``
gunzipped within the download size limits), its XML and its entries.

What becomes of the entries (scope rules, requests for pages or child sitemaps,
``sitemap/urls`` and the other per-entry stats) is the spider's
``parse_sitemap``. Here: an oversized, corrupt or unparsable file is logged and
counted as ``sitemap/invalid``, never raised; entries read before the XML
breaks are kept.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lxml import etree
from scrapy.http import Response

# Private, no public name: gunzip's "over max_size" (checked: tests/test_scrapy_private_api.py)
from scrapy.utils._compression import _DecompressionMaxSizeExceeded
from scrapy.utils.gz import gunzip
from scrapy.utils.sitemap import Sitemap

from crawlproject.limits import SITEMAP_MAX_BYTES

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

SITEMAP_MAX_ENTRIES = 50_000  # per sitemap file (sitemaps.org); the rest are dropped
GZIP_MAGIC = b"\x1f\x8b"


def open_sitemap(
    response: Response, limits: tuple[int, int], stats: StatsCollector
) -> Sitemap | None:
    """The response's sitemap (a urlset or a sitemapindex), or None: unusable,
    logged and counted. ``limits``: the (max, warn) decompressed sizes of a
    download, which a request's ``download_maxsize``/``download_warnsize`` override."""
    body = sitemap_body(response, *limits)
    if body is None:
        stats.inc_value("sitemap/invalid")
        return None
    try:
        sitemap = Sitemap(body)
    except (etree.LxmlError, StopIteration) as exc:  # StopIteration: no root element
        logger.warning("Ignoring invalid sitemap %s: %r", response.url, exc)
        stats.inc_value("sitemap/invalid")
        return None
    if sitemap.type not in ("urlset", "sitemapindex"):
        logger.warning("Ignoring sitemap %s: root element <%s>", response.url, sitemap.type)
        stats.inc_value("sitemap/invalid")
        return None
    return sitemap


def sitemap_entries(
    sitemap: Sitemap, response: Response, stats: StatsCollector
) -> Iterator[dict[str, Any]]:
    """The sitemap's entries, up to where its XML breaks (logged, ``sitemap/invalid``)."""
    try:
        yield from sitemap
    except etree.LxmlError as exc:
        logger.warning("Sitemap %s is malformed past some entries: %r", response.url, exc)
        stats.inc_value("sitemap/invalid")


def sitemap_body(response: Response, default_max: int, default_warn: int) -> bytes | None:
    """The sitemap XML, gunzipped if the body is gzip (None: unusable, logged).

    Content-Encoding: gzip is undone by HttpCompressionMiddleware; this is for
    ``.xml.gz`` files served as application/x-gzip or octet-stream. Limits as
    in Scrapy's SitemapSpider, except that no limit means SITEMAP_MAX_BYTES.
    """
    body = response.body
    if not body.startswith(GZIP_MAGIC):
        return body
    max_size = response.meta.get("download_maxsize", default_max)
    if max_size <= 0:
        max_size = SITEMAP_MAX_BYTES  # decompressed, when DOWNLOAD_MAXSIZE is 0
    warn_size = response.meta.get("download_warnsize", default_warn)
    try:
        xml = gunzip(body, max_size=max_size)
    except _DecompressionMaxSizeExceeded:
        logger.warning(
            "Ignoring sitemap %s: larger than %d bytes once decompressed",
            response.url,
            max_size,
        )
        return None
    except (OSError, EOFError, struct.error, zlib.error) as exc:
        logger.warning("Ignoring sitemap %s: corrupt gzip: %r", response.url, exc)
        return None
    if len(body) < warn_size <= len(xml):
        logger.warning(
            "Sitemap %s is %d bytes once decompressed, over the download warning size (%d B)",
            response.url,
            len(xml),
            warn_size,
        )
    return xml
