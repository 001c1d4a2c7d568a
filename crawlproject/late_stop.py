"""A stop that comes while the spider opens closes it once it has opened.

Scrapy's graceful stop (SIGTERM, SIGINT, Scrapyd's cancel) calls
``Crawler.stop_async``, which stops the engine only if it is already running.
A stop that lands while the spider is still opening (the frontier connecting,
the pipelines opening their stores) does nothing, and the process then stops
its reactor: the spider is never closed. Its components never say goodbye:
the worker stays in the crawl's worker set until its heartbeat ages out (so
the last worker of a ``SCHEDULER_PERSIST=False`` crawl keeps the crawl's keys
for a dead one), claimed URLs wait for their leases to expire, and an open
WARC is never finished.

This extension adds a step to the reactor's shutdown ("before shutdown"
triggers run, and are waited for, before the reactor stops): if the spider
was opened or is opening and has not closed, it waits until the engine runs
(at most ``OPEN_WAIT_SECONDS``) and stops it as the stop would have, so the
spider closes with reason ``shutdown``. A forced stop (the second signal:
Scrapy then ignores further ones) is left alone: it means now.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.reactor import is_reactor_installed

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

# Opening a spider takes a Redis connection and a store: seconds at most. A
# spider still opening after this is stuck, and the shutdown goes on.
OPEN_WAIT_SECONDS = 60.0
POLL_SECONDS = 0.05


class LateStop:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._closed = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LateStop:
        if not is_reactor_installed():  # TWISTED_REACTOR_ENABLED=False: no reactor shutdown
            raise NotConfigured("no Twisted reactor: its shutdown has no 'before' step")
        ext = cls(crawler)
        # Fires on every close, an open that failed included (the engine then
        # closes the spider it had started to open).
        crawler.signals.connect(ext._spider_closed, signal=signals.spider_closed)
        from twisted.internet import reactor

        # zope's interface stub for IReactorCore counts ``self`` as an argument.
        reactor.addSystemEventTrigger("before", "shutdown", ext._before_shutdown)  # type: ignore[arg-type]
        return ext

    def _spider_closed(self, spider: Spider, reason: str) -> None:
        self._closed = True

    def _before_shutdown(self) -> Deferred[None] | None:
        if self._closed or self.crawler.engine is None or _forced():
            return None
        return deferred_from_coro(self._stop_when_open())

    async def _stop_when_open(self) -> None:
        engine = self.crawler.engine
        assert engine is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OPEN_WAIT_SECONDS
        while not engine.running and not self._closed and loop.time() < deadline:
            await asyncio.sleep(POLL_SECONDS)
        if self._closed:
            return
        if not engine.running:
            logger.warning(
                "Shutdown: the spider did not finish opening within %.0f s; it stops unclosed",
                OPEN_WAIT_SECONDS,
            )
            return
        logger.info("Shutdown asked while the spider was opening: closing it now it is open")
        await engine.stop_async()


def _forced() -> bool:
    """Scrapy ignores SIGINT/SIGTERM once a second one asked to stop at once."""
    return signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
