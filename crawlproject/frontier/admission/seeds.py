"""Seeds, whatever the spider: each carries the operator's vote (meta
``crawl_seed``) and a scope root (meta ``crawl_scope``, the URL's
``host[:port]`` unless the spider gave one): :func:`mark_seed`.

* the spider's start requests (``start_urls``, ``start()`` /
  ``start_requests()``): Scrapy marks them ``is_start_request``
  (scrapy/spidermiddlewares/start.py) and admission.py marks them seeds;
* ``-a seeds=URL,URL`` on a spider that keeps the argument as its ``seeds``
  attribute (one that takes no such argument): enqueued once per worker as
  the spider's ``make_seed_request(url)`` if it has one, else
  ``Request(url)`` (the spider's default callback, ``parse``);
* the crawl's ``<crawl>:start_urls`` list (scrapy-redis's convention;
  ``crawlproject seed`` pushes to it): a URL per entry, or a JSON object
  ``{"url": ..., "meta": {...}}``. Entries leave the list only once their
  URLs are stored.

A spider that does not want a start request to count as a seed sets meta
``crawl_seed`` to False on it.

A seed the crawler cannot fetch as written, or that the guard refuses
without fetching, is named in one WARNING, counted (``seeds/refused``) and
skipped, wherever it comes from: seed_check.py. A spider's ``start_urls`` are
checked when the spider opens, before Scrapy reads its ``start()``: one bad
URL there would otherwise raise out of Scrapy's default ``start()`` and end
it, cancelling the start URLs after it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider, signals

from crawlproject.frontier.admission.seed_check import SeedCheck
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY, SEED_META_KEY
from crawlproject.frontier.store.codec import host_root
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.guard.policy import GuardPolicy

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


START_URLS_BATCH = 100
START_META_KEY = "is_start_request"  # Scrapy's StartSpiderMiddleware sets it


def mark_seed(request: Request) -> Request:
    """``request`` as a seed: the operator's vote (unless the spider said no,
    ``crawl_seed`` False) and its scope root, the URL's ``host[:port]``, when
    the spider gave none."""
    request.meta.setdefault(SEED_META_KEY, True)
    if request.meta[SEED_META_KEY] and request.meta.get(SCOPE_META_KEY) is None:
        root = host_root(request.url)
        if root is not None:
            request.meta[SCOPE_META_KEY] = root
    return request


def argument_seeds(spider: Spider | None) -> list[str]:
    """The URLs of ``-a seeds=`` that the spider left to the frontier: its
    ``seeds`` attribute (Scrapy sets it from an argument the spider does not
    take), comma-separated text or a list of URLs."""
    value = getattr(spider, "seeds", None) if spider is not None else None
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)):
        return []
    return [u.strip() for u in value if isinstance(u, str) and u.strip()]


class SeedReader:
    def __init__(self, stats: StatsCollector, check: SeedCheck | None = None) -> None:
        self.stats = stats
        self.check = check if check is not None else SeedCheck(stats, GuardPolicy())
        self._arguments_taken = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SeedReader:
        assert crawler.stats is not None
        reader = cls(crawler.stats, SeedCheck.from_crawler(crawler))
        # spider_opened comes after the scheduler opened and before the engine
        # reads the spider's start(): the start URLs are checked in time.
        crawler.signals.connect(reader.check_start_urls, signals.spider_opened)
        return reader

    def check_start_urls(self, spider: Spider) -> None:
        """Takes out of ``spider.start_urls`` the URLs that cannot be seeds
        (each said and counted): Scrapy's default ``start()`` makes a Request
        of each, and one that raises there ends ``start()``."""
        urls = getattr(spider, "start_urls", None)
        if not isinstance(urls, (list, tuple)):
            return
        kept = [u for u in urls if not isinstance(u, str) or self.check.accepts(u)]
        if len(kept) != len(urls):
            spider.start_urls = kept

    async def take(
        self,
        frontier: RedisFrontier,
        spider: Spider | None,
        enqueue: Callable[[Request], bool],
        write: Callable[[], Awaitable[None]],
    ) -> None:
        """Reads a batch of seeds, enqueues them, writes, then trims the list
        (the first time, the spider's ``-a seeds=`` too)."""
        if not self._arguments_taken:
            self._arguments_taken = True
            urls = argument_seeds(spider)
            for url in urls:
                request = self._request(url, url, {}, spider)
                if request is not None:
                    enqueue(request)
            if urls:
                await write()
        raw = await frontier.read_start_urls(START_URLS_BATCH)
        if not raw:
            return
        for item in reversed(raw):  # oldest first
            request = self.request_of(item, spider)
            if request is not None:
                enqueue(request)
        await write()  # stored before they leave the list
        # Two workers may read one batch at once (both enqueue it: the seen
        # test keeps one copy); the one whose trim takes it off counts it.
        taken = await frontier.trim_start_urls(raw)
        if taken:
            self.stats.inc_value("frontier/start_urls", taken)

    def request_of(self, item: bytes, spider: Spider | None) -> Request | None:
        text = item.decode("utf-8", "replace").strip()
        meta: dict[str, Any] = {}
        url = text
        if text.startswith("{"):
            try:
                obj = json.loads(text)
                url = obj["url"]
                meta = dict(obj.get("meta") or {})
            except (ValueError, KeyError, TypeError):
                self.check.refuse(text, 'not a URL nor a JSON object {"url": ...}')
                return None
        return self._request(url, text, meta, spider)

    def _request(
        self, url: object, text: str, meta: dict[str, Any], spider: Spider | None
    ) -> Request | None:
        make = getattr(spider, "make_seed_request", None)
        if not isinstance(url, str):
            self.check.refuse(text, f"its URL is a {type(url).__name__}, not a string")
            return None
        if not self.check.accepts(url):
            return None
        try:
            request = make(url) if callable(make) else Request(url)
        except (ValueError, TypeError) as exc:  # the spider's make_seed_request refused it
            self.check.refuse(text, str(exc))
            return None
        request.meta.update(meta)
        return mark_seed(request)
