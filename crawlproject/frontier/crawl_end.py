"""When this worker's crawl is over: ``max_pages`` reached crawl-wide, or the
whole frontier empty with nothing in flight anywhere for
``CRAWL_IDLE_CLOSE_SECONDS`` (never, in a continuous crawl, which waits for
recrawls)."""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)


class CrawlEnd:
    def __init__(self, idle_close_seconds: float) -> None:
        self.idle_close_seconds = idle_close_seconds
        self.finished = False
        self.max_pages: int | None = None
        self.continuous = False
        self.done_estimate = 0  # crawl-wide finished URLs, as last seen
        # This worker's spider start() is still being read (the ack spider
        # middleware's process_start): its seeds may come yet.
        self.starts_running = False
        self._idle_since: float | None = None

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
            if pending or busy_here or self.continuous:
                self._idle_since = None
                return wake
            if self._idle_since is None:
                self._idle_since = now
                return wake
            if now - self._idle_since < self.idle_close_seconds:
                return wake
            logger.info(
                "Frontier empty and nothing in flight for %.1f s: finishing",
                now - self._idle_since,
            )
            self.finished = True
        return True
