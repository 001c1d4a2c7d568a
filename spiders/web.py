"""The ``web`` spider: follow links from seeds, within a scope.

    scrapy crawl web -a seeds=https://a.example/,https://b.example/
    scrapy crawl web -a seeds_file=seeds.txt -a scope=domains -a max_depth=3
    scrapy crawl web -a crawl=news          # join (or resume) the crawl "news"

Arguments: ``seeds`` (comma-separated), ``seeds_file`` (one URL per line, ``#``
comments), ``scope`` = ``hosts`` (default: the seeds' hosts) | ``domains``
(their registered domains) | ``any``, ``max_depth``, ``max_pages`` (crawl-wide),
``crawl`` (name of the shared crawl, default ``CRAWL_NAME``).

Order is breadth-first: each host's queue is FIFO and links are appended.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor
from twisted.python.failure import Failure

from crawlproject.frontier.scheduler import SCOPE_META_KEY, SEED_META_KEY
from crawlproject.frontier.urls import registered_domain

logger = logging.getLogger(__name__)

SCOPES = ("hosts", "domains", "any")


class WebSpider(Spider):
    name = "web"

    def __init__(
        self,
        seeds: str | None = None,
        seeds_file: str | None = None,
        scope: str = "hosts",
        max_depth: str | int | None = None,
        max_pages: str | int | None = None,
        crawl: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        self.scope = scope
        self.max_depth = None if max_depth in (None, "") else int(max_depth)
        self.crawl_max_pages = None if max_pages in (None, "") else int(max_pages)
        self.crawl_name = crawl or None
        self.seed_urls = [u.strip() for u in (seeds or "").split(",") if u.strip()]
        if seeds_file:
            lines = Path(seeds_file).read_text(encoding="utf-8").splitlines()
            self.seed_urls += [u.strip() for u in lines if u.strip() and not u.startswith("#")]
        self.seed_roots = {r for u in self.seed_urls if (r := self.scope_root(u))}
        self.link_extractor = LinkExtractor(unique=True)

    def scope_root(self, url: str) -> str | None:
        """What a URL must share with a seed to be in scope (None: unparsable)."""
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
            port = parts.port
        except ValueError:
            return None
        if not host:
            return None
        if self.scope == "domains":
            return registered_domain(host)
        return f"{host}:{port}" if port else host

    def make_seed_request(self, url: str) -> Request:
        return Request(
            url,
            callback=self.parse,
            errback=self.on_error,
            meta={SEED_META_KEY: True, SCOPE_META_KEY: self.scope_root(url), "depth": 0},
        )

    async def start(self) -> AsyncIterator[Any]:
        for url in self.seed_urls:
            if urlsplit(url).scheme not in ("http", "https"):
                self.crawler.stats.inc_value("web/bad_seed")
                logger.warning("Skipped seed %r: not an http(s) URL", url)
                continue
            yield self.make_seed_request(url)

    def in_scope(self, url: str, response: Response) -> bool:
        if self.scope == "any":
            return True
        root = self.scope_root(url)
        if root is None:
            return False
        if root == response.meta.get(SCOPE_META_KEY) or root in self.seed_roots:
            return True
        if response.meta.get(SEED_META_KEY) and root == self.scope_root(response.url):
            return True  # a seed that redirected (http -> https, -> www.)
        scheduler = self.crawler.engine.scheduler if self.crawler.engine else None
        return root in getattr(scheduler, "scope_roots", ())

    def parse(self, response: Response) -> Iterator[Any]:
        depth = response.meta.get("depth", 0)
        is_text = isinstance(response, TextResponse)
        yield {
            "url": response.url,
            "status": response.status,
            "depth": depth,
            "content_type": (response.headers.get("Content-Type") or b"").decode("latin-1"),
            "length": len(response.body),
            "title": (response.css("title::text").get() or "").strip() if is_text else None,
        }
        if not isinstance(response, TextResponse) or (
            self.max_depth is not None and depth >= self.max_depth
        ):
            return
        scope = response.meta.get(SCOPE_META_KEY)
        if response.meta.get(SEED_META_KEY):
            scope = self.scope_root(response.url) or scope
        for link in self.link_extractor.extract_links(response):
            if not self.in_scope(link.url, response):
                self.crawler.stats.inc_value("web/out_of_scope")
                continue
            yield Request(
                link.url,
                callback=self.parse,
                errback=self.on_error,
                meta={SCOPE_META_KEY: scope},
            )

    def on_error(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        self.crawler.stats.inc_value(f"web/error/{type(failure.value).__name__}")
        logger.info("Failed %s: %s", getattr(request, "url", "?"), failure.getErrorMessage())
