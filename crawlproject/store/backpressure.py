"""When a worker stops taking new pages because its spool is too full.

While the body store is unreachable, finished files wait in the local spool
(crawlproject/store/uploader.py); nothing else bounds it, so a long outage
under load would fill the disk and then every write would fail. The storage
pipeline (pipelines/store.py) measures the spool on a timer
(:func:`measure_spool`) and asks a :class:`SpoolGate` whether the worker
should pause (stop taking new requests, keep its leases) or resume.

The gate is pure (no I/O, clock injected): it pauses when the spool holds more
than ``max_bytes`` or its filesystem has less than ``min_free_bytes`` free, or
when a write failed for lack of space; it resumes only once both are back
inside the limits by a margin (:data:`RESUME_FRACTION`), so a spool hovering
at the cap does not flap between paused and running.
"""

from __future__ import annotations

import enum
import errno
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
