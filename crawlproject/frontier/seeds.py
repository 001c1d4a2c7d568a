"""Seeds from the crawl's ``<crawl>:start_urls`` list (scrapy-redis's
convention): a URL per entry, or a JSON object ``{"url": ..., "meta": {...}}``.
Entries leave the list only once their URLs are stored."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider

from crawlproject.frontier.client import RedisFrontier

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

START_URLS_BATCH = 100


class SeedReader:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    async def take(
        self,
        frontier: RedisFrontier,
        spider: Spider | None,
        enqueue: Callable[[Request], bool],
        write: Callable[[], Awaitable[None]],
    ) -> None:
        """Reads a batch of seeds, enqueues them, writes, then trims the list."""
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
        make = getattr(spider, "make_seed_request", None)
        try:
            request = make(url) if callable(make) else Request(url)
        except (ValueError, TypeError) as exc:
            self.stats.inc_value("frontier/bad_start_url")
            logger.warning("Skipped start_urls entry %.200r: %s", text, exc)
            return None
        request.meta.update(meta)
        return request
