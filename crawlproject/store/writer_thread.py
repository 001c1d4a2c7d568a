"""Where the storage pipeline's writes run: a small page inline, the rest in one thread.

A small page is written at once on the reactor's thread (a thread hand-off
costs more than its gzip: ~0.16 ms CPU for 2.6 KB, bench/warc_write.py, short
enough not to hold the reactor); a large one (gzip takes ms), a rotation and
anything else that blocks, in the writer thread. While one call is there every
write goes there too, so records keep their order and the writer is never
used by two threads at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Bodies up to this size are written on the reactor thread; larger ones in the
# writer thread.
INLINE_WRITE_MAX_BYTES = 64 * 1024
# An idle writer's open file is checked this often (at most) for its age, so a
# quiet worker still finishes it after CRAWL_STORE_ROTATE_SECONDS.
ROTATION_CHECK_MAX_SECONDS = 30.0


class Rotating(Protocol):
    def rotate_if_due(self) -> object: ...


class WriterThread:
    """The writer's one thread and the rule above (module doc)."""

    def __init__(self, inline_max_bytes: int = INLINE_WRITE_MAX_BYTES) -> None:
        self.inline_max_bytes = inline_max_bytes
        self._in_thread = 0  # calls handed to the thread, not yet done
        # One thread: the writers are not thread-safe, and records stay in order.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warc-writer")

    async def write(self, call: Callable[[], T], size: int) -> T:
        """``call()`` writing ``size`` bytes of body: inline when small and
        nothing is in the thread, else in the thread."""
        if self._in_thread == 0 and size <= self.inline_max_bytes:
            return call()
        return await self.run(call)

    async def run(self, call: Callable[[], T]) -> T:
        """``call()`` in the thread; meanwhile no write runs inline."""
        self._in_thread += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        finally:
            self._in_thread -= 1

    async def rotate_when_due(self, writer: Rotating, rotate_seconds: float) -> None:
        """Finishes the open file once it is old enough even when no page comes
        (writes check it too): a quiet worker's last pages still reach the
        store. Runs until cancelled."""
        period = min(rotate_seconds / 4, ROTATION_CHECK_MAX_SECONDS)
        while True:
            await asyncio.sleep(period)
            try:  # in the thread: a rename and fsyncs
                await self.run(writer.rotate_if_due)
            except OSError:
                logger.exception("Could not finish the open file; the next write retries")

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
