"""One writer's rolling, append-only file: the WARC files and the object format's indexes.

A file is written as ``<prefix>-<UTC yyyymmddHHMMSS>-<seq><suffix>.open``:
created exclusively, opened ``O_APPEND`` without user-space buffering (a
returned write is in the kernel: a killed process loses nothing it wrote) and
locked with ``flock`` (freed by the kernel if the process dies, so a starting
worker's recovery can tell a live writer's file from a dead one's). It is
finished at ``max_bytes``, when ``max_seconds`` old (on ``clock``), or on
``rotate()`` / ``close()``: fsynced, renamed to its final name while still
locked, the directory fsynced, then handed to ``on_finished`` (an exception
there is logged, not raised: the file is final on disk by then).

Not thread-safe: one thread at a time (the storage pipeline's rule).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

logger = logging.getLogger(__name__)

OPEN_SUFFIX = ".open"  # appended to the final name while the file is written
# keep_bytes(fd, size) -> (bytes whole at the start of a file, what they hold).
KeepBytes = Callable[[int, int], tuple[int, str]]
SEQ_DIGITS = 5
# A recovery (objects.py: the last newline, backwards; warc_recovery.py: the
# gzip members) reads a file this much at a time.
RECOVERY_READ_BYTES = 1 << 20


@dataclass(slots=True)
class OpenFile:
    path: Path  # the ``.open`` name
    final_path: Path
    fd: int
    size: int
    opened_at: float  # on the writer's clock


def fsync_directory(directory: Path) -> None:
    """Makes a rename in ``directory`` durable (where the filesystem can)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class RollingFile:
    """The current file of one writer (module doc). ``what`` names it in logs."""

    def __init__(
        self,
        directory: Path,
        prefix: str,
        suffix: str,
        max_bytes: int,
        max_seconds: float,
        what: str,
        clock: Callable[[], float] = time.monotonic,
        on_finished: Callable[[Path], None] | None = None,
    ) -> None:
        if not prefix or "/" in prefix:
            raise ValueError(f"bad {what} file prefix {prefix!r}")
        self.directory = directory
        self.prefix = prefix
        self.suffix = suffix
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.what = what
        self.clock = clock
        self.on_finished = on_finished
        self._seq = 0
        self._file: OpenFile | None = None

    @property
    def current(self) -> OpenFile | None:
        return self._file

    def open_new(self, first: Callable[[str], bytes] | None = None) -> OpenFile:
        """Opens the next file; ``first(final name)`` gives the bytes it starts
        with (a WARC file's warcinfo record)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        while True:
            name = f"{self.prefix}-{stamp}-{self._seq:0{SEQ_DIGITS}d}{self.suffix}"
            self._seq += 1
            final_path = self.directory / name
            path = final_path.with_name(name + OPEN_SUFFIX)
            if final_path.exists():  # a previous run's file from the same second
                continue
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            except FileExistsError:
                continue
            break
        size = 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if first is not None:
                data = first(name)
                write_all(fd, data)
                size = len(data)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._file = OpenFile(path, final_path, fd, size, self.clock())
        logger.debug("%s %s opened", self.what, path)
        return self._file

    def append(self, current: OpenFile, data: bytes, fsync: bool = False) -> int:
        """Appends ``data`` to ``current`` in one piece; returns its offset. A
        failed write is cut off again, so later data never follows garbage."""
        offset = current.size
        try:
            write_all(current.fd, data)
            if fsync:
                os.fsync(current.fd)
        except BaseException:
            try:
                os.ftruncate(current.fd, current.size)
            except OSError:
                # Left to the recovery at the next start.
                logger.exception("%s %s: cannot undo a failed write; abandoned", self.what,
                                 current.path)  # fmt: skip
                self._file = None
                os.close(current.fd)
            raise
        current.size += len(data)
        return offset

    def rotate(self) -> Path | None:
        """Finish the open file now; its final path, or None when none is open."""
        if self._file is None:
            return None
        return self._finish(self._file)

    def rotate_if_due(self) -> Path | None:
        """Finish the open file if it is big or old enough (writers call it
        before each write; an idle writer's timer calls it too)."""
        current = self._file
        if current is None:
            return None
        too_big = current.size >= self.max_bytes
        too_old = self.clock() - current.opened_at >= self.max_seconds
        return self._finish(current) if too_big or too_old else None

    def _finish(self, current: OpenFile) -> Path:
        self._file = None
        try:
            os.fsync(current.fd)
            # Renamed while still locked: recovery in another process must not
            # take the file between our close and our rename.
            os.replace(current.path, current.final_path)
        finally:
            os.close(current.fd)
        fsync_directory(self.directory)
        logger.info("%s %s finished (%d bytes)", self.what, current.final_path, current.size)
        hand_over(self.on_finished, current.final_path)
        return current.final_path


class RollingWriter:
    """What the WARC writer and the object writer share: one rolling file
    (``_file``: their WARC file, its index) finished by size, by age, on
    :meth:`rotate` or :meth:`close`; a context manager that closes it."""

    _file: RollingFile

    def rotate(self) -> Path | None:
        """Finish the open file now; its final path, or None when none is open."""
        return self._file.rotate()

    def rotate_if_due(self) -> Path | None:
        return self._file.rotate_if_due()

    def close(self) -> Path | None:
        return self._file.rotate()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def hand_over(on_finished: Callable[[Path], None] | None, path: Path) -> None:
    """``on_finished(path)``; an exception is logged, not raised."""
    if on_finished is None:
        return
    try:
        on_finished(path)
    except Exception:
        logger.exception("%s: on_finished failed", path)


def recover_open_files(
    directory: Path,
    suffix: str,
    what: str,
    keep_bytes: KeepBytes,
    prefix: str | None = None,
) -> list[Path]:
    """Finishes the ``<suffix>.open`` files killed writers left in ``directory``
    (of one writer's ``prefix``), skipping those a live writer holds (locked).

    ``keep_bytes(fd, size)`` tells how much of a file is whole, with a few words
    on what that holds for the log: the rest (a torn tail) is cut, the file
    renamed to its final name; a file with nothing whole is deleted. Returns
    the renamed paths. Run it before a new writer of the directory starts.
    """
    if not directory.is_dir():
        return []
    recovered: list[Path] = []
    for path in sorted(directory.glob(f"*{suffix}{OPEN_SUFFIX}")):
        if prefix is not None and not path.name.startswith(f"{prefix}-"):
            continue
        final_path = _recover(path, what, keep_bytes)
        if final_path is not None:
            recovered.append(final_path)
    if recovered:
        fsync_directory(directory)
    return recovered


def _recover(
    path: Path, what: str, keep_bytes: Callable[[int, int], tuple[int, str]]
) -> Path | None:
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:  # finished meanwhile by its writer
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.debug("%s %s is being written; not recovered", what, path)
            return None
        try:
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                return None  # renamed and replaced between our open and our lock
        except FileNotFoundError:
            return None
        size = os.fstat(fd).st_size
        good_bytes, held = keep_bytes(fd, size)
        if good_bytes == 0:
            path.unlink()
            logger.warning("%s %s held nothing whole (%d bytes); deleted", what, path, size)
            return None
        if good_bytes < size:
            os.ftruncate(fd, good_bytes)
            logger.warning(
                "%s %s: cut a torn tail of %d bytes after %s", what, path, size - good_bytes, held
            )
        os.fsync(fd)
        final_path = path.with_name(path.name.removesuffix(OPEN_SUFFIX))
        os.replace(path, final_path)
        logger.info("%s %s recovered: %s", what, final_path, held)
        return final_path
    finally:
        os.close(fd)
