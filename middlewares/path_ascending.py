"""Path-ascending discovery: queue the directories above each fetched page.

For a page at ``http://h/a/b/page.html`` the middleware yields, after the
spider's own output, requests for ``http://h/a/b/``, ``http://h/a/`` and
``http://h/`` (never the page itself, never a query), which find directory
indexes no page links to. On with ``CRAWL_PATH_ASCENDING`` (off by default).

The requests are made like the ``web`` spider's links: callback ``parse``
(errback ``on_error`` if the spider has one), ``depth`` = the page's depth + 1,
the page's scope in meta; nothing is yielded when the spider's ``max_depth``
is reached or the page's URL is out of the spider's scope (``in_scope``, when
the spider has one: a page redirected off-site). Only 2xx responses that the
spider's ``parse`` handled (callback ``parse`` or none) ascend: not sitemaps.

They go through the normal scheduler: its URL rules and seen test apply, so a
directory already queued by any worker is not fetched twice. This process
also remembers the last ``ASCENDED_MEMORY`` directories it yielded and does
not yield them again (a site's ``/`` would otherwise follow every page).

Order: above DepthMiddleware (900), so the requests get Scrapy's depth
accounting and ``DEPTH_LIMIT``, then the Referer, URL length, dedupe (the
directories of a duplicate page are not followed, as its links are not) and
frontier_ack middlewares, like the spider's links. Stat: ``path_ascending/requests``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

from scrapy import Request
from scrapy.http import Response
from scrapy.settings import BaseSettings

from crawlproject.component_off import switched_off
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY, SEED_META_KEY
from crawlproject.once import OncePerKey
from crawlproject.setting_values import ConfigError, Setting, read_config

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# Directories (as URLs) this process remembers having yielded: ~200 bytes each, ~10 MB.
ASCENDED_MEMORY = 50_000


@dataclass(frozen=True)
class PathAscendingConfig:
    enabled: Annotated[bool, Setting("CRAWL_PATH_ASCENDING")]
    memory: int = ASCENDED_MEMORY

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> PathAscendingConfig:
        return read_config(cls, settings)

    def validate(self) -> None:
        if self.memory < 1:
            raise ConfigError("path-ascending memory must be >= 1")


def parent_directories(path: str) -> list[str]:
    """The directories above ``path``, nearest first, without ``path`` itself.

    ``/a/b/page.html`` -> ``["/a/b/", "/a/", "/"]``; ``/a/b/`` -> ``["/a/", "/"]``;
    ``/`` -> ``[]``. Directories ending in ``//`` (empty segments) are skipped.
    """
    out: list[str] = []
    path = path or "/"
    end = path.rstrip("/").rfind("/")  # the slash ending the nearest parent
    while end >= 0:
        parent = path[: end + 1]
        if not parent.endswith("//"):
            out.append(parent)
        end = path.rfind("/", 0, end)
    return out


class PathAscendingSpiderMiddleware:
    def __init__(
        self, crawler: Crawler, config: PathAscendingConfig, stats: StatsCollector
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self._ascended = OncePerKey(config.memory)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PathAscendingSpiderMiddleware:
        config = PathAscendingConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise switched_off(
                cls, crawler.settings, "CRAWL_PATH_ASCENDING is off", "CRAWL_PATH_ASCENDING"
            )
        assert crawler.stats is not None
        return cls(crawler, config, crawler.stats)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for obj in result:
            yield obj
        for request in self._ascend(response):
            yield request

    def _ascend(self, response: Response) -> list[Request]:
        spider = self.crawler.spider
        if spider is None or not 200 <= response.status < 300:
            return []
        parse: Callable[..., Any] | None = getattr(spider, "parse", None)
        callback = response.request.callback if response.request is not None else None
        if parse is None or callback not in (None, parse):
            return []  # a sitemap, or another kind of response the spider handles
        depth = int(response.meta.get("depth", 0))
        max_depth = getattr(spider, "max_depth", None)
        if isinstance(max_depth, int) and depth >= max_depth:
            return []
        parts = urlsplit(response.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return []
        parents = parent_directories(parts.path)
        if not parents or not self._in_scope(spider, parts, response):
            return []
        scope = response.meta.get(SCOPE_META_KEY)
        scope_root = getattr(spider, "scope_root", None)
        if response.meta.get(SEED_META_KEY) and callable(scope_root):
            scope = scope_root(response.url) or scope  # as WebSpider.parse does for links
        errback = getattr(spider, "on_error", None)
        requests = []
        for path in parents:
            url = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
            if not self._ascended.first(url):
                continue
            requests.append(
                Request(
                    url,
                    callback=parse,
                    errback=errback,
                    meta={SCOPE_META_KEY: scope, "depth": depth + 1},
                )
            )
        if requests:
            self.stats.inc_value("path_ascending/requests", len(requests))
            logger.debug("Ascending from %s: %d directories", response.url, len(requests))
        return requests

    @staticmethod
    def _in_scope(spider: Spider, parts: SplitResult, response: Response) -> bool:
        in_scope = getattr(spider, "in_scope", None)
        if not callable(in_scope):
            return True
        # Every directory shares the page's host and port: one test covers them.
        return bool(in_scope(urlunsplit((parts.scheme, parts.netloc, "/", "", "")), response))
