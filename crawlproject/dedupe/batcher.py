"""Gathering the pages a worker judges at about the same moment into one round
trip to the duplicate index (:class:`DedupeBatcher`)."""

from __future__ import annotations

from crawlproject.dedupe.index import DedupeIndex, DedupeVerdict
from crawlproject.round_trips import Gatherer

# Pages judged within this window go to Redis in one round trip.
DEDUPE_BATCH_WINDOW_SECONDS = 0.02
DEDUPE_BATCH_MAX_PAGES = 64

_Args = tuple[bytes, int | None, str, str]


class DedupeBatcher:
    """Gathers the ``check_and_add`` calls made within ``window_seconds`` into
    one round trip (``check_and_add_many``, through crawlproject/round_trips.py's
    Gatherer): one script run per page as before, a fraction of the
    client-side cost per page. A worker judges pages as they come; the window
    only delays when a page's links leave, not any fetch. An error of the
    round trip reaches each page's caller (RedisError: the page is kept)."""

    def __init__(
        self,
        index: DedupeIndex,
        window_seconds: float = DEDUPE_BATCH_WINDOW_SECONDS,
        max_pages: int = DEDUPE_BATCH_MAX_PAGES,
    ) -> None:
        self.index = index
        self._gatherer: Gatherer[_Args, DedupeVerdict] = Gatherer(
            self._check_many, window_seconds, max_pages
        )

    async def check_and_add(
        self, digest: bytes, simhash: int | None, url: str, host: str
    ) -> DedupeVerdict:
        return await self._gatherer.call((digest, simhash, url, host))

    async def _check_many(self, batch: list[_Args]) -> list[DedupeVerdict]:
        return await self.index.check_and_add_many(batch)
