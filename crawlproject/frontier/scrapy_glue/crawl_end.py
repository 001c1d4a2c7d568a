"""When this worker's crawl is over: ``max_pages`` reached crawl-wide, or the
whole frontier empty with nothing in flight anywhere for
``CRAWL_IDLE_CLOSE_SECONDS`` (or a scrapy-redis ``MAX_IDLE_TIME_BEFORE_CLOSE``
above 0: redis_spiders.py), never in a continuous crawl (``-a mode=continuous``),
which waits for recrawls.

A worker that finds nothing to do from its start says why, once, when the
frontier is first seen empty (idle_reasons.py): its crawl was finished before
it came (INFO, with how to crawl again), or it has no seeds (WARNING, with how
to give them)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from crawlproject.frontier.scrapy_glue.idle_reasons import IdleReasons
from crawlproject.frontier.scrapy_glue.redis_spiders import adopt_redis_spider, max_idle_seconds

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

    from crawlproject.frontier.store.keys import CrawlKeys

logger = logging.getLogger(__name__)


def is_continuous(spider: object) -> bool:
    """A continuous crawl: the ``web`` spider's ``continuous`` (from ``-a
    mode=continuous``), or any spider's ``-a mode=continuous``."""
    return bool(getattr(spider, "continuous", False)) or getattr(spider, "mode", None) == (
        "continuous"
    )


class CrawlEnd:
    def __init__(self, idle_close_seconds: float, crawler: Crawler | None = None) -> None:
        self.idle_close_seconds = idle_close_seconds
        self.finished = False
        self.max_pages: int | None = None
        self.continuous = False
        self.done_estimate = 0  # crawl-wide finished URLs, as last seen
        # This worker's spider start() is still being read (the ack spider
        # middleware's process_start): its seeds may come yet.
        self.starts_running = False
        self._idle_since: float | None = None
        self.reasons = IdleReasons(crawler)

    def watch(self, crawler: Crawler, spider: Spider, keys: CrawlKeys) -> None:
        """The spider's own ending: ``crawl_max_pages``, continuous mode, a
        scrapy-redis spider's seed list, idle handler and idle time."""
        self.max_pages = getattr(spider, "crawl_max_pages", None)
        self.continuous = is_continuous(spider)
        adopt_redis_spider(crawler, spider, keys)
        max_idle = max_idle_seconds(spider, crawler.settings)
        if max_idle is not None and not self.continuous:
            self.idle_close_seconds = max_idle
            logger.info(
                "MAX_IDLE_TIME_BEFORE_CLOSE=%g: finishing after %g s of a fleet-wide empty "
                "frontier (instead of CRAWL_IDLE_CLOSE_SECONDS)",
                max_idle,
                max_idle,
            )
        self.reasons.watch(spider, keys, self.idle_close_seconds)

    def note_done(self, done: int) -> bool:
        """Records the crawl-wide done count; True if the engine should look
        (max_pages reached: the crawl finishes)."""
        self.done_estimate = max(self.done_estimate, done)
        if self.max_pages is not None and self.done_estimate >= self.max_pages:
            if not self.finished:
                logger.info("max_pages=%d reached crawl-wide: finishing", self.max_pages)
                self.finished = True
            return True
        return False

    def check(self, counters: dict[str, int], busy_here: bool) -> bool:
        """After a maintenance turn: True if the engine should look (finished).
        ``busy_here``: this worker holds work (or its engine has not started)."""
        wake = self.note_done(counters.get("done", 0))
        busy_here = busy_here or self.starts_running
        pending = counters.get("queued", 0) + counters.get("leased", 0)
        pending += counters.get("start_urls", 0)
        now = time.monotonic()
        if not self.finished:
            if pending:
                self.reasons.saw_work()
            if pending or busy_here or self.continuous:
                self._idle_since = None
                return wake
            if self._idle_since is None:
                self._idle_since = now
                self.reasons.first_idle(counters.get("done", 0))
                return wake
            if now - self._idle_since < self.idle_close_seconds:
                return wake
            logger.info(
                "Frontier empty and nothing in flight for %.1f s: finishing",
                now - self._idle_since,
            )
            self.finished = True
        return True
