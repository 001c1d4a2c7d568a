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
``crawl_seed`` to False on it."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider

from crawlproject.frontier.client import RedisFrontier
from crawlproject.frontier.codec import host_root
from crawlproject.frontier.meta import SCOPE_META_KEY, SEED_META_KEY

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

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
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self._arguments_taken = False

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
                self.stats.inc_value("frontier/bad_start_url")
                logger.warning("Skipped a malformed start_urls entry: %.200r", text)
                return None
        return self._request(url, text, meta, spider)

    def _request(
        self, url: object, text: str, meta: dict[str, Any], spider: Spider | None
    ) -> Request | None:
        make = getattr(spider, "make_seed_request", None)
        try:
            if not isinstance(url, str):
                raise TypeError(f"URL must be a string, not {type(url).__name__}")
            request = make(url) if callable(make) else Request(url)
        except (ValueError, TypeError) as exc:
            self.stats.inc_value("frontier/bad_start_url")
            logger.warning("Skipped seed %.200r: %s", text, exc)
            return None
        request.meta.update(meta)
        return mark_seed(request)
