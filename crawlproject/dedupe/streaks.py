"""A host whose pages keep being duplicates: a trap's shape (soft-404 and
session-id spaces look like that). When a host's pages have been duplicates
``CRAWL_DEDUPE_STREAK`` times in a row (the index counts the streak), its
queued URLs are set aside in the frontier (parked: kept, not deleted), or,
with ``CRAWL_DEDUPE_STREAK_ACTION=off``, only said."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from crawlproject.dedupe.config import DedupeConfig
from crawlproject.once import OncePerKey

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# Hosts whose streak was logged (and counted) here: bounded, like every
# per-host memory of a worker (a host forgotten may be counted again).
PARKED_HOSTS_REMEMBERED = 100_000


class Parking(Protocol):
    async def park_host(self, host: str) -> int: ...


class DuplicateStreaks:
    def __init__(
        self, config: DedupeConfig, stats: StatsCollector, frontier: Callable[[], Parking]
    ) -> None:
        self.config = config
        self.stats = stats
        self._frontier = frontier
        self._said = OncePerKey(PARKED_HOSTS_REMEMBERED)

    async def check(self, host: str, streak: int) -> None:
        """After a duplicate of ``host``'s, the streak the index counted."""
        if not self.config.streak or streak < self.config.streak:
            return
        if self.config.streak_action == "off":
            if self._said.first(host):
                logger.info("%s: %d duplicate pages in a row", host, streak)
            return
        parked = await self._frontier().park_host(host)
        self.stats.inc_value("dedupe/streak_parked_urls", parked)
        if self._said.first(host):
            self.stats.inc_value("dedupe/streak_hosts")
            logger.info(
                "%s: %d duplicate pages in a row (a trap?): %d queued URL(s) set aside",
                host,
                streak,
                parked,
            )
