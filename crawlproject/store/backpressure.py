"""When a worker stops taking new pages because its spool is too full.

While the body store is unreachable, finished files wait in the local spool
(crawlproject/store/uploader.py); nothing else bounds it, so a long outage
under load would fill the disk and then every write would fail.
:class:`SpoolBackpressure`, which the storage pipeline (pipelines/store.py)
starts and writes through, measures the spool every
``CRAWL_STORE_SPOOL_CHECK_SECONDS`` (:func:`measure_spool`) and asks a
:class:`SpoolGate` whether the worker should pause (stop taking new requests,
finish the pages in flight; the frontier hands back what it claimed and had
not started) or resume. A write that fails for lack of space pauses the
worker too and is tried again after the resume, so the page is neither lost
nor acked unstored.

The gate is pure (no I/O, clock injected): it pauses when the spool holds more
than ``max_bytes`` or its filesystem has less than ``min_free_bytes`` free, or
when a write failed for lack of space; it resumes only once both are back
inside the limits by a margin (:data:`RESUME_FRACTION`), so a spool hovering
at the cap does not flap between paused and running.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import errno
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Resume once the spool is under this fraction of its cap and the free space
# above the floor divided by it (1.25 x): room for a few more files before the
# next pause, so an outage's end does not pause and resume every check.
RESUME_FRACTION = 0.8
# After a write failed for lack of space, resume only with at least this much
# free (on a small filesystem, this fraction of it; or the configured floor,
# if larger): room for the waiting pages and a few more files.
WRITE_FAILED_MIN_FREE_BYTES = 64 * 1024 * 1024
WRITE_FAILED_MIN_FREE_FRACTION = 0.1
# Write errors that uploads (which free spool space) can cure: the page waits.
SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# The spool is measured at most this often: a scan of a huge spool (the object
# format's many files) must not cost more than a tenth of its thread's time.
SPOOL_CHECK_MIN_INTERVAL_PER_SCAN = 10.0
# While paused, the WARNING is repeated this often: a pause that lasts (a disk
# someone must clear, a store down for hours) stays visible in the log's tail.
PAUSE_REMINDER_SECONDS = 300.0


class Change(enum.Enum):
    PAUSE = "pause"
    RESUME = "resume"


@dataclass(frozen=True, slots=True)
class SpoolUsage:
    spooled_bytes: int  # every file under the spool directory, open ones included
    files: int
    free_bytes: int  # free to this process on the spool's filesystem
    disk_bytes: int = 0  # that filesystem's size


def measure_spool(directory: Path) -> SpoolUsage:
    """Bytes and files under ``directory`` (recursive) and its filesystem's free
    space. Blocking disk I/O: call it off the reactor thread. Files removed
    during the walk (an upload finished) are skipped."""
    total = files = 0
    pending = [directory]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except FileNotFoundError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
                    files += 1
            except FileNotFoundError:
                continue
    where = directory
    while not where.exists() and where != where.parent:
        where = where.parent  # not created yet: its filesystem is its parent's
    disk = shutil.disk_usage(where)
    return SpoolUsage(spooled_bytes=total, files=files, free_bytes=disk.free, disk_bytes=disk.total)


def is_space_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in SPACE_ERRNOS


class SpoolGate:
    """Paused or not, from the spool's measured usage (module doc).

    ``max_bytes`` 0: no cap on the spool's size; ``min_free_bytes`` 0: no floor
    on the free space. :meth:`check` and :meth:`write_failed` return the change
    to make (or None); the counters say how often and how long it paused.
    """

    def __init__(
        self,
        max_bytes: int,
        min_free_bytes: int,
        resume_fraction: float = RESUME_FRACTION,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_bytes < 0 or min_free_bytes < 0:
            raise ValueError("max_bytes and min_free_bytes must be >= 0")
        if not 0 < resume_fraction < 1:
            raise ValueError("resume_fraction must be between 0 and 1")
        self.max_bytes = max_bytes
        self.min_free_bytes = min_free_bytes
        self.resume_fraction = resume_fraction
        self.clock = clock
        self.paused = False
        self.reason = ""  # why it paused, for the log
        self.pauses = 0
        self._paused_since = 0.0
        self._paused_total = 0.0  # pauses that ended
        self.last_pause_seconds = 0.0  # the latest pause that ended
        self._free_floor = min_free_bytes  # raised by a write failure until resumed

    def paused_seconds(self) -> float:
        """Time spent paused, the current pause included."""
        return self._paused_total + self.current_pause_seconds()

    def current_pause_seconds(self) -> float:
        return self.clock() - self._paused_since if self.paused else 0.0

    def check(self, usage: SpoolUsage) -> Change | None:
        if not self.paused:
            reason = self._over(usage)
            return self._pause(reason) if reason else None
        if self._under(usage):
            self.last_pause_seconds = self.clock() - self._paused_since
            self._paused_total += self.last_pause_seconds
            self.paused = False
            self.reason = ""
            self._free_floor = self.min_free_bytes
            return Change.RESUME
        return None

    def write_failed(self, usage: SpoolUsage) -> Change | None:
        """A write failed for lack of space (:func:`is_space_error`): pause
        until the free space is back above a floor, whatever the limits say."""
        need = WRITE_FAILED_MIN_FREE_BYTES
        if usage.disk_bytes:
            need = min(need, int(usage.disk_bytes * WRITE_FAILED_MIN_FREE_FRACTION))
        self._free_floor = max(self._free_floor, need)
        if self.paused:
            return None
        return self._pause(f"a write failed: no space left ({usage.free_bytes} bytes free)")

    def _pause(self, reason: str) -> Change:
        self.paused = True
        self.reason = reason
        self.pauses += 1
        self._paused_since = self.clock()
        return Change.PAUSE

    def _over(self, usage: SpoolUsage) -> str:
        if self.max_bytes and usage.spooled_bytes > self.max_bytes:
            return f"the spool holds {usage.spooled_bytes} bytes, over its cap of {self.max_bytes}"
        if self._free_floor and usage.free_bytes < self._free_floor:
            return f"its filesystem has {usage.free_bytes} bytes free, under {self._free_floor}"
        return ""

    def _under(self, usage: SpoolUsage) -> bool:
        size_ok = not self.max_bytes or usage.spooled_bytes <= self.max_bytes * self.resume_fraction
        free_ok = (
            not self._free_floor or usage.free_bytes >= self._free_floor / self.resume_fraction
        )
        return size_ok and free_ok


class SpoolBackpressure:
    """Pauses the worker while its spool is too full, and makes a write that
    failed for lack of space wait for the resume (module doc).

    ``pause()`` and ``resume()`` stop and restart the engine taking new
    requests; ``pending_uploads()`` is for the log; ``finish_open_file()`` is
    awaited (in the background) at each pause: the open file can only be
    uploaded once finished, so without it a cap near
    ``CRAWL_STORE_ROTATE_BYTES`` would hold the pause until the file ages out.
    Keeps the gauges `crawlproject status` shows: ``store/spool_bytes``,
    ``store/backpressure_paused``, ``store/backpressure_seconds``; counts
    ``store/backpressure_pauses`` and ``store/write_failed``.
    """

    def __init__(
        self,
        gate: SpoolGate,
        spool: Path,
        check_seconds: float,
        stats: StatsCollector,
        pause: Callable[[], None],
        resume: Callable[[], None],
        pending_uploads: Callable[[], int],
        finish_open_file: Callable[[], Coroutine[Any, Any, None]],
    ) -> None:
        self.gate = gate
        self.spool = spool
        self.check_seconds = check_seconds
        self.stats = stats
        self._pause = pause
        self._resume = resume
        self._pending_uploads = pending_uploads
        self._finish_open_file = finish_open_file
        self._watch_task: asyncio.Task[None] | None = None
        self._reminded_at = 0.0  # loop time of the last pause WARNING
        self._side_tasks: set[asyncio.Task[None]] = set()
        # Set while not paused: pages whose write failed for lack of space wait on it.
        self._running = asyncio.Event()
        self._running.set()

    def start(self) -> None:
        """Starts measuring the spool, if a limit is set."""
        if self.gate.max_bytes or self.gate.min_free_bytes:
            self._ensure_watching()

    async def stop(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task
        if self.gate.paused:
            self.stats.set_value("store/backpressure_seconds", round(self.gate.paused_seconds(), 3))

    async def write_when_room(self, write: Callable[[], Awaitable[T]], url: str) -> T:
        """``await write()``; a write that fails for lack of space pauses the
        worker and is tried again once it resumes. Any other OSError is raised."""
        while True:
            try:
                return await write()
            except OSError as exc:
                self.stats.inc_value("store/write_failed")
                if not is_space_error(exc):
                    raise
                usage = await asyncio.to_thread(measure_spool, self.spool)
                self._apply(self.gate.write_failed(usage), usage)
                self._ensure_watching()
                logger.debug("Storing %s waits for spool space (%s)", url, exc)
            await self._running.wait()

    def _ensure_watching(self) -> None:
        # Also started by a failed write with both limits off: only it resumes.
        if self._watch_task is None:
            self._watch_task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        previous: float | None = None  # when the previous scan began
        while True:
            started = loop.time()
            try:
                usage = await asyncio.to_thread(measure_spool, self.spool)
            except OSError:
                logger.exception("Could not measure the spool %s", self.spool)
            else:
                # The spool may pass the cap by what is written between two
                # measurements: at most this long apart (a scan's thread hop, the
                # sleep below, a busy loop), which can be well over check_seconds.
                apart = None if previous is None else loop.time() - previous
                self._apply(self.gate.check(usage), usage, apart)
            previous = started
            scan_seconds = loop.time() - started
            await asyncio.sleep(
                max(self.check_seconds, scan_seconds * SPOOL_CHECK_MIN_INTERVAL_PER_SCAN)
            )

    def _apply(self, change: Change | None, usage: SpoolUsage, apart: float | None = None) -> None:
        """Acts on the gate's decision; keeps the gauges. ``apart``: at most how
        long before this measurement the previous one was taken (said at a pause)."""
        self.stats.set_value("store/spool_bytes", usage.spooled_bytes)
        self.stats.set_value("store/backpressure_paused", int(self.gate.paused))
        self.stats.set_value("store/backpressure_seconds", round(self.gate.paused_seconds(), 3))
        loop = asyncio.get_running_loop()
        if change is Change.PAUSE:
            self._running.clear()
            self.stats.inc_value("store/backpressure_pauses")
            self._pause()
            since = f", measured within {apart:.2f} s of the previous check" if apart else ""
            logger.warning(
                "Paused taking new pages: %s (%d bytes in %d file(s) spooled in %s, "
                "%d file(s) waiting for upload%s); pages in flight finish, resuming once uploads "
                "or freed disk space make room",
                self.gate.reason, usage.spooled_bytes, usage.files, self.spool,
                self._pending_uploads(), since,
            )  # fmt: skip
            self._reminded_at = loop.time()
            task = loop.create_task(self._finish_open_file())
            self._side_tasks.add(task)  # held: the loop keeps only weak references
            task.add_done_callback(self._side_tasks.discard)
        elif change is None and self.gate.paused:
            now = loop.time()
            if now - self._reminded_at >= PAUSE_REMINDER_SECONDS:
                self._reminded_at = now
                logger.warning(
                    "Still paused after %.0f s: %s (%d bytes spooled, %d bytes free)",
                    self.gate.current_pause_seconds(),
                    self.gate.reason, usage.spooled_bytes, usage.free_bytes,
                )  # fmt: skip
        elif change is Change.RESUME:
            self._resume()
            self._running.set()
            logger.info(
                "Resumed taking new pages after %.1f s paused: the spool holds %d bytes "
                "(%d file(s)), %d bytes free",
                self.gate.last_pause_seconds, usage.spooled_bytes, usage.files, usage.free_bytes,
            )  # fmt: skip
