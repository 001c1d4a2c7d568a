"""The ``web`` spider: follow links from seeds, within a scope.

    scrapy crawl web -a seeds=https://a.example/,https://b.example/
    scrapy crawl web -a seeds_file=seeds.txt -a scope=domains -a max_depth=3
    scrapy crawl web -a crawl=news          # join (or resume) the crawl "news"

Arguments: ``seeds`` (comma-separated), ``seeds_file`` (one URL per line, ``#``
comments), ``scope`` = ``hosts`` (default: the seeds' hosts) | ``domains``
(their registered domains) | ``any``, ``max_depth``, ``max_pages`` (crawl-wide),
``crawl`` (name of the shared crawl, default ``CRAWL_NAME``), ``mode`` =
``once`` (default: stop when the frontier is empty) | ``continuous`` (stay up,
track every fetch and serve the recrawls ``crawlproject recrawl`` queues).

Order is breadth-first: each host's queue is FIFO and links are appended.

Content: each answer goes, by MIME type, to the content processor the settings
route it to (``CRAWL_CONTENT_PROCESSORS``: HTML, plain text, PDF, RSS/Atom;
crawlproject/content/), which adds fields to the fetch record and names the
links to follow. Stats: ``content/processed/<name>``, ``content/error/<name>``,
``content/unprocessed/<type>``.

Sitemaps: a downloader middleware schedules each ``Sitemap:`` URL of a host's
robots.txt with ``callback=parse_sitemap``. Sitemap files (plain or ``.xml.gz``)
and sitemap indexes are read (spiders/sitemaps.py) with the same scope rules as
links; page URLs keep their ``<lastmod>`` in ``meta["crawl_lastmod"]``. Stats:
``sitemap/*``.

Limits and hostile pages (crawlproject/limits.py): a download over a limit
(size, decompressed size, timeout, redirects, a redirect loop) reaches
``on_error``, which counts it (``limits/*``) and records the fetch (its lease
ends with the request, as every lease: crawlproject/frontier/scrapy_glue/engine_hooks.py);
an empty or binary body served as text is counted
(``content/empty_body``, ``content/binary_as_text``) and not processed; charset
trouble is counted (``content/bad_charset``, ``content/no_charset``); a page's
links beyond CRAWL_MAX_LINKS_PER_PAGE are dropped (``limits/links_truncated``).
Each is logged once per host (per URL for download limits).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response, TextResponse
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from crawlproject import limits
from crawlproject.content import ContentProcessor, ContentRegistry, mime_type_of
from crawlproject.frontier.admission.seed_check import SeedCheck, seed_problem
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY, SEED_META_KEY
from crawlproject.limits import SITEMAP_META_KEY
from crawlproject.once import OncePerKey
from crawlproject.recrawl.config import CHANGEFREQ_META_KEY, LASTMOD_META_KEY
from crawlproject.recrawl.schedule import NOT_MODIFIED_STATUS
from crawlproject.setting_values import crawl_setting
from crawlproject.store.config import RESPONSE_ITEM_KEY
from spiders.records import RECORD_KEYS, fetch_record
from spiders.scope import is_http_url, scope_root_of
from spiders.sitemaps import SITEMAP_MAX_ENTRIES, open_sitemap, sitemap_entries

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

SCOPES = ("hosts", "domains", "any")

MODES = ("once", "continuous")
# (outcome, host) pairs remembered for "logged once per host" (LRU).
LOGGED_ONCE_KEYS = 100_000


class WebSpider(Spider):
    name = "web"
    # Its first item for each response is its record of that fetch: the
    # duplicate filter (middlewares/dedupe.py) writes the page's verdict into it
    # (content_sha1, simhash, dedupe, ...) and drops a copy's. Another spider's
    # items never get a field.
    fetch_records = True

    def __init__(
        self,
        seeds: str | None = None,
        seeds_file: str | None = None,
        scope: str = "hosts",
        max_depth: str | int | None = None,
        max_pages: str | int | None = None,
        crawl: str | None = None,
        mode: str = "once",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        # Continuous: the worker stays up when the frontier is empty, serving
        # the URLs the recrawl service (crawlproject recrawl) queues again, and
        # every fetch is tracked for recrawl (CRAWL_RECRAWL_TRACK).
        self.continuous = mode == "continuous"
        self.scope = scope
        self.max_depth = None if max_depth in (None, "") else int(max_depth)
        self.crawl_max_pages = None if max_pages in (None, "") else int(max_pages)
        self.crawl_name = crawl or None
        self.seed_urls = [u.strip() for u in (seeds or "").split(",") if u.strip()]
        if seeds_file:
            lines = Path(seeds_file).read_text(encoding="utf-8").splitlines()
            self.seed_urls += [u.strip() for u in lines if u.strip() and not u.startswith("#")]
        self.seed_roots = {r for u in self.seed_urls if (r := self.scope_root(u))}
        self._failed_processors: set[str] = set()  # names whose error was logged
        self._logged = OncePerKey(LOGGED_ONCE_KEYS)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        # Built once, at start: a misrouted processor fails the worker, not a page.
        spider.content = ContentRegistry.from_crawler(crawler)
        return spider

    @cached_property
    def content(self) -> ContentRegistry:
        """The processors by MIME type (CRAWL_CONTENT_PROCESSORS)."""
        return ContentRegistry.from_crawler(self.crawler)

    @cached_property
    def max_links_per_page(self) -> int:
        """Links taken from one page at most (CRAWL_MAX_LINKS_PER_PAGE; 0: all)."""
        return int(crawl_setting(self.settings, "CRAWL_MAX_LINKS_PER_PAGE"))

    @cached_property
    def store_bodies(self) -> bool:
        """Page bodies go to the WARC storage pipeline (CRAWL_STORE_ENABLED)."""
        return bool(crawl_setting(self.settings, "CRAWL_STORE_ENABLED"))

    def scope_root(self, url: str) -> str | None:
        """What a URL must share with a seed to be in scope (None: unparsable)."""
        return scope_root_of(url, self.scope)

    def make_seed_request(self, url: str) -> Request:
        return Request(
            url,
            callback=self.parse,
            errback=self.on_error,
            meta={SEED_META_KEY: True, SCOPE_META_KEY: self.scope_root(url), "depth": 0},
        )

    async def start(self) -> AsyncIterator[Any]:
        # A seed that cannot be fetched as written is said, counted
        # (seeds/refused) and skipped; the others are crawled (seed_check.py).
        check = SeedCheck.from_crawler(self.crawler)
        for url in self.seed_urls:
            why = seed_problem(url)
            if why is not None:
                check.refuse(url, why)
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
        try:
            scheduler = self.crawler.engine.scheduler
        except RuntimeError:  # Scrapy 2.19: no engine before the crawl starts
            return False
        return root in getattr(scheduler, "scope_roots", ())

    def parse(self, response: Response) -> Iterator[Any]:
        depth = response.meta.get("depth", 0)
        # title: the content processor's, if it finds one
        item = fetch_record(response.meta, response.url, response, {"title": None}, response.url)
        if response.status == NOT_MODIFIED_STATUS:
            # A recrawl's conditional GET answered "unchanged": no body to
            # store, judge or follow (middlewares/recrawl.py records it).
            item["not_modified"] = True
            yield item
            return
        links = self._process_content(response, item)
        if self.store_bodies:  # the storage pipeline takes it out again
            item[RESPONSE_ITEM_KEY] = response
        yield item  # before the links: the duplicate filter may hold them back
        if self.max_depth is not None and depth >= self.max_depth:
            return
        scope = response.meta.get(SCOPE_META_KEY)
        if response.meta.get(SEED_META_KEY):
            scope = self.scope_root(response.url) or scope
        for url in self._capped_links(links, response):
            if not self.in_scope(url, response):
                self.crawler.stats.inc_value("web/out_of_scope")
                continue
            yield Request(
                url,
                callback=self.parse,
                errback=self.on_error,
                meta={SCOPE_META_KEY: scope},
            )

    def _process_content(self, response: Response, item: dict[str, Any]) -> Iterable[str]:
        """Runs the processor of the response's MIME type: its fields go into
        the item, its links are returned. Never raises: a failing processor is
        counted and logged, and the fetch record is kept as it is."""
        stats = self.crawler.stats
        mime = mime_type_of(response)
        content_type = item["content_type"]
        problem = limits.body_problem(response.body, mime, content_type)
        if problem is not None:  # nothing worth parsing: the record is kept as is
            item["content_problem"] = problem.rsplit("/", 1)[-1]
            self._count_once_per_host(problem, response.url, f"served as {mime or '?'}")
            return ()
        processor = self.content.processor_for(mime)
        if processor is None:
            stats.inc_value(f"content/unprocessed/{mime or 'none'}")
            return ()
        if isinstance(response, TextResponse):
            charset = limits.charset_problem(content_type, response.body, response.encoding)
            if charset is not None:  # Scrapy decoded it anyway (replacement characters)
                self._count_once_per_host(charset, response.url, f"decoded as {response.encoding}")
        try:
            result = processor.process(response)
        except Exception as exc:  # a plug-in's bug must not cost the record
            self._processor_failed(processor, response, exc)
            return ()
        stats.inc_value(f"content/processed/{processor.name}")
        for key, value in result.fields.items():
            if key not in RECORD_KEYS:
                item[key] = value
        return self._guarded_links(processor, response, result.links)

    def _capped_links(self, links: Iterable[str], response: Response) -> Iterator[str]:
        """The page's links, up to CRAWL_MAX_LINKS_PER_PAGE: a page of a million
        links costs no more than one of the limit (the rest are never extracted
        when the processor yields them lazily)."""
        cap = self.max_links_per_page
        if cap <= 0:
            yield from links
            return
        for count, url in enumerate(links):
            if count == cap:
                self._count_once_per_host(
                    limits.LINKS_TRUNCATED, response.url, f"more than {cap} links, the rest dropped"
                )
                return
            yield url

    def _count_once_per_host(self, stat: str, url: str, detail: str) -> None:
        """Counts ``stat``; logs it (at INFO) for the first URL of each host only."""
        self.crawler.stats.inc_value(stat)
        host = urlsplit(url).netloc
        first = self._logged.first(f"{stat} {host}")
        logger.log(
            logging.INFO if first else logging.DEBUG,
            "%s at %s: %s%s",
            stat,
            url,
            detail,
            " (further ones on this host are logged at DEBUG)" if first else "",
        )

    def _guarded_links(
        self, processor: ContentProcessor, response: Response, links: Iterable[str]
    ) -> Iterator[str]:
        # Links may be computed lazily, after the item left: guard that too.
        try:
            yield from links
        except Exception as exc:
            self._processor_failed(processor, response, exc)

    def _processor_failed(
        self, processor: ContentProcessor, response: Response, exc: Exception
    ) -> None:
        self.crawler.stats.inc_value(f"content/error/{processor.name}")
        # Logged once per processor at WARNING (a crawl meets many bad files).
        first = processor.name not in self._failed_processors
        self._failed_processors.add(processor.name)
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "Content processor %s failed on %s: %s%s",
            processor.name,
            response.url,
            exc,
            " (further failures are logged at DEBUG)" if first else "",
        )

    def on_error(self, failure: Failure) -> list[dict[str, Any]]:
        """Counts and logs a failed fetch; returns its fetch record (none for a
        request that was never sent, e.g. one robots.txt forbids)."""
        request = getattr(failure, "request", None)
        error = type(failure.value).__name__
        self.crawler.stats.inc_value(f"web/error/{error}")
        http_error = failure.check(HttpError) is not None
        limit = limits.limit_of_failure(failure.value)
        if limit is not None:  # a limit stopped the fetch: its one log line
            self.crawler.stats.inc_value(limit)
        # IgnoreRequest (robots.txt forbidden or deferred, ...) is a decision, not a failure
        skipped = failure.check(IgnoreRequest) is not None and not http_error and limit is None
        level = logging.DEBUG if skipped or http_error else logging.INFO
        logger.log(
            level,
            "Failed %s: %s%s",
            getattr(request, "url", "?"),
            f"{limit}: " if limit else "",
            failure.getErrorMessage(),
        )
        if skipped or not isinstance(request, Request):
            return []
        # A non-2xx answer (HttpErrorMiddleware) or a network error: it was a
        # fetch (or an attempt), so the crawl's record has it too.
        exc = failure.value
        response = exc.response if isinstance(exc, HttpError) else None
        extra = {"error": error, **({"limit": limit.rsplit("/", 1)[-1]} if limit else {})}
        record = fetch_record(request.meta, request.url, response, extra, request.url)
        if response is not None and self.store_bodies:
            # Every answer is kept, 4xx and 5xx too (CRAWL_STORE_STATUSES narrows it).
            record[RESPONSE_ITEM_KEY] = response
        return [record]

    # -- sitemaps ------------------------------------------------------------

    def parse_sitemap(self, response: Response) -> Iterator[Request]:
        """Requests for a sitemap's pages (urlset) or child sitemaps (sitemapindex).

        Never raises: an oversized, corrupt or unparsable sitemap is logged and
        counted as ``sitemap/invalid`` (spiders/sitemaps.py reads the file). If the
        XML breaks after some entries, the entries read so far are kept. At most
        SITEMAP_MAX_ENTRIES per file.
        """
        stats = self.crawler.stats
        sitemap = open_sitemap(response, self._sitemap_size_limits, stats)
        if sitemap is None:
            return
        is_index = sitemap.type == "sitemapindex"
        scope = response.meta.get(SCOPE_META_KEY)
        for count, entry in enumerate(sitemap_entries(sitemap, response, stats), 1):
            if count > SITEMAP_MAX_ENTRIES:
                stats.inc_value("sitemap/truncated")
                logger.warning(
                    "Sitemap %s has more than %d entries; ignoring the rest",
                    response.url,
                    SITEMAP_MAX_ENTRIES,
                )
                return
            loc = entry.get("loc") or ""
            if not is_http_url(loc):
                stats.inc_value("sitemap/bad_url")
                continue
            if not self.in_scope(loc, response):
                stats.inc_value("sitemap/out_of_scope")
                continue
            if is_index:
                stats.inc_value("sitemap/sitemaps")
                yield Request(
                    loc,
                    callback=self.parse_sitemap,
                    errback=self.on_error,
                    meta={SCOPE_META_KEY: scope, SITEMAP_META_KEY: True},
                )
                continue
            meta: dict[str, Any] = {SCOPE_META_KEY: scope}
            if lastmod := entry.get("lastmod"):
                meta[LASTMOD_META_KEY] = lastmod
            if changefreq := entry.get("changefreq"):
                meta[CHANGEFREQ_META_KEY] = changefreq
            stats.inc_value("sitemap/urls")
            yield Request(loc, callback=self.parse, errback=self.on_error, meta=meta)

    @cached_property
    def _sitemap_size_limits(self) -> tuple[int, int]:
        """(max, warn) decompressed sizes in bytes, as for downloads (0: no limit)."""
        settings = self.crawler.settings
        return (
            getattr(self, "download_maxsize", settings.getint("DOWNLOAD_MAXSIZE")),
            getattr(self, "download_warnsize", settings.getint("DOWNLOAD_WARNSIZE")),
        )
