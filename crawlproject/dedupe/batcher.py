"""Gathering the pages a worker judges at about the same moment into one round
trip to the duplicate index (:class:`DedupeBatcher`)."""

from __future__ import annotations

import asyncio
from typing import Any

from crawlproject.dedupe.index import DedupeIndex, DedupeVerdict

# Pages judged within this window go to Redis in one round trip.
DEDUPE_BATCH_WINDOW_SECONDS = 0.02
DEDUPE_BATCH_MAX_PAGES = 64


class DedupeBatcher:
    """Gathers the ``check_and_add`` calls made within ``window_seconds`` into
    one round trip (``check_and_add_many``): one script run per page as before,
    a fraction of the client-side cost per page. A worker judges pages as they
    come; the window only delays when a page's links leave, not any fetch."""

    def __init__(
        self,
        index: DedupeIndex,
        window_seconds: float = DEDUPE_BATCH_WINDOW_SECONDS,
        max_pages: int = DEDUPE_BATCH_MAX_PAGES,
    ) -> None:
        self.index = index
        self.window_seconds = window_seconds
        self.max_pages = max_pages
        self._pending: list[tuple[tuple[bytes, int | None, str, str], asyncio.Future[Any]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def check_and_add(
        self, digest: bytes, simhash: int | None, url: str, host: str
    ) -> DedupeVerdict:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[DedupeVerdict] = loop.create_future()
        self._pending.append(((digest, simhash, url, host), future))
        if len(self._pending) >= self.max_pages:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.window_seconds, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.ensure_future(self._send(batch))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(
        self, batch: list[tuple[tuple[bytes, int | None, str, str], asyncio.Future[Any]]]
    ) -> None:
        try:
            verdicts = await self.index.check_and_add_many(args for args, _ in batch)
        except Exception as exc:  # each caller gets the error (RedisError: page kept)
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), verdict in zip(batch, verdicts, strict=True):
            if not future.done():
                future.set_result(verdict)
