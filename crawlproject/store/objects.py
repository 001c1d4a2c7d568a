"""Page bodies as content-addressed objects (``CRAWL_STORE_FORMAT = "object"``).

Each distinct body is one gzip object named after its payload digest (the SHA-1
of the body in base32, as WARC-Payload-Digest has it: :func:`~crawlproject.
body_digest.payload_digest`), so a body served under many URLs is stored once.
The cost is one store PUT per distinct body, where WARC files cost about one
PUT per thousands of pages.

Spool layout (one directory, shared by the workers of a machine):

* ``<BASE32>.gz``: an object, gzip of the body as Scrapy saw it (decoded).
  Written to a hidden temporary file (``.<BASE32>.gz.<random>.tmp``, held
  under ``flock``) and renamed with ``os.replace``: a killed worker never
  leaves half an object under the final name, and :func:`sweep_object_spool`
  deletes the temporary files nobody holds. Store key
  ``<crawl>/objects/<BASE32>.gz``. Objects with the same digest are the same
  body, so when two workers (or two runs) write or upload one twice, the
  overwrite is harmless.
* ``<crawl>-<worker>-<yyyymmddHHMMSS>-<seq>.cdxj.open``: this worker's rolling
  index, one CDXJ line per stored page (``<SURT key> <14-digit timestamp>
  <JSON>``, keyed as the WARC indexes are (crawlproject/store/index.py) but
  in crawl order, not sorted; JSON keys ``url``, ``mime``, ``status``,
  ``digest``, ``length`` (body bytes) and ``object`` (the object's store
  key)), appended with one ``os.write`` per
  line (``O_APPEND``). Finished like a WARC file (by size, by age, at close):
  renamed to ``.cdxj``, store key ``<crawl>/index/<name>.cdxj``.

Order: an object is handed to the uploader (``on_finished``) before the index
line naming it is written, and the index file only when finished; the uploader
works through its queue in order, so an index never names an object the store
lacks. An object already in the spool (written by another worker sharing it, or
left from an earlier run) is handed over again, so this uploader's queue has it
before the index naming it (the uploader drops a file another one took first).

Recovery (:func:`sweep_object_spool`, at the uploader's start): a ``.cdxj.open``
file no live writer holds is cut after its last complete line and renamed to
``.cdxj`` (deleted if no line is left). Objects need none: they are whole or
absent. Then the objects are queued before the index files.

Durability: an object and an index line are in the kernel when the write
returns (safe from ``kill -9``); a finished index file is fsynced before its
rename. Objects are not fsynced (a disk flush per distinct body): after a power
loss an object may be empty or torn, the same trade as WARC (warc.py).

This format does not archive redirects (the 3xx answers, which the WARC
format writes as they are received): an object and an index line per
redirect would cost a PUT for a few bytes, and its lines keep no headers (no
Location). middlewares/redirect_hops.py is off with it; the fetch record's
``redirects`` still lists the hops.

Not thread-safe: one writer, one thread.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import logging
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from crawlproject.body_digest import payload_digest
from crawlproject.default_settings import CRAWL_STORE_ROTATE_BYTES, CRAWL_STORE_ROTATE_SECONDS
from crawlproject.store.index import INDEX_SUFFIX, url_key
from crawlproject.store.rolling import (
    RECOVERY_READ_BYTES,
    RollingFile,
    RollingWriter,
    hand_over,
    write_all,
)
from crawlproject.store.rolling import recover_open_files as rolling_recover

logger = logging.getLogger(__name__)

OBJECT_SUFFIX = ".gz"
TMP_SUFFIX = ".tmp"
OBJECTS_KEY_DIR = "objects"
INDEX_KEY_DIR = "index"
# Digests this process wrote, remembered so a repeated body costs no gzip and
# no disk I/O; 65,536 entries of ~100 bytes are ~7 MB.
STORED_DIGESTS_MAX_ENTRIES = 65_536
# zlib's default level: a body is compressed once, on the crawl's hot path.
OBJECT_GZIP_LEVEL = 6


@dataclass(frozen=True, slots=True)
class StoredObject:
    """Where a page's body is: what the pipeline puts in the item."""

    digest: str  # ``sha1:<BASE32>``
    key: str  # the object's store key
    written: bool  # False when an object of this digest was already stored


def object_name(digest: str) -> str:
    """``<BASE32>.gz`` for ``sha1:<BASE32>``."""
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha1" or not value.isalnum():
        raise ValueError(f"bad payload digest {digest!r}")
    return value + OBJECT_SUFFIX


def store_key(key_prefix: str, path: Path) -> str:
    """The store key of a spooled file: ``<prefix>objects/<name>`` for an object,
    ``<prefix>index/<name>`` for an index file (the uploader's ``key_for``)."""
    folder = INDEX_KEY_DIR if path.name.endswith(INDEX_SUFFIX) else OBJECTS_KEY_DIR
    return f"{key_prefix}{folder}/{path.name}"


class ObjectWriter(RollingWriter):
    """One worker's objects and rolling CDXJ index in ``directory``.

    ``write_page`` stores a body (unless its digest is already stored), appends
    its index line and returns a :class:`StoredObject`. ``on_finished(path)``
    gets each new object and each finished index file, in that order (module
    doc); an exception from it is logged, not raised. Index files are named
    after ``prefix`` (``<crawl>-<worker>``) and finished at ``max_index_bytes``
    or ``max_index_seconds`` (on ``clock``), by ``rotate()`` or ``close()``.
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        key_prefix: str,
        max_index_bytes: int = CRAWL_STORE_ROTATE_BYTES,
        max_index_seconds: float = CRAWL_STORE_ROTATE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        on_finished: Callable[[Path], None] | None = None,
        max_stored_digests: int = STORED_DIGESTS_MAX_ENTRIES,
    ) -> None:
        if max_stored_digests < 1:
            raise ValueError(f"max_stored_digests must be >= 1, got {max_stored_digests}")
        self.directory = directory
        self.key_prefix = key_prefix
        self.on_finished = on_finished
        self.max_stored_digests = max_stored_digests
        self._stored: OrderedDict[str, None] = OrderedDict()  # LRU, newest last
        self._file = RollingFile(
            directory, prefix, INDEX_SUFFIX, max_index_bytes, max_index_seconds, "Index", clock,
            on_finished,
        )  # fmt: skip

    @property
    def open_index_path(self) -> Path | None:
        current = self._file.current
        return current.path if current else None

    def object_key(self, digest: str) -> str:
        return store_key(self.key_prefix, self.directory / object_name(digest))

    def write_page(
        self,
        url: str,
        status: int,
        mime: str,
        body: bytes,
        fetched_at: datetime,
        digest: str | None = None,
    ) -> StoredObject:
        """Store ``body`` (``digest``: its :func:`payload_digest`, when the caller
        has it already) and index it under ``url``."""
        if digest is None:
            digest = payload_digest(body)
        written = self._store_object(digest, body)
        key = self.object_key(digest)
        if fetched_at.tzinfo is not None:
            fetched_at = fetched_at.astimezone(UTC)
        fields = {
            "url": url,
            "mime": mime,
            "status": status,
            "digest": digest,
            "length": len(body),
            "object": key,
        }
        line = (
            f"{url_key(url)} {fetched_at:%Y%m%d%H%M%S} {json.dumps(fields, ensure_ascii=False)}\n"
        )
        self._append_line(line.encode("utf-8"))
        return StoredObject(digest, key, written)

    def _store_object(self, digest: str, body: bytes) -> bool:
        """Write the object unless stored already; whether it was written."""
        if digest in self._stored:
            self._stored.move_to_end(digest)
            return False
        final_path = self.directory / object_name(digest)
        written = not final_path.exists()
        if written:
            self._write_object(final_path, body)
        self._remember(digest)
        # Also when it was spooled already: this uploader must have it queued
        # before the index naming it (a no-op if it is).
        self._hand_over(final_path)
        return written

    def _remember(self, digest: str) -> None:
        self._stored[digest] = None
        if len(self._stored) > self.max_stored_digests:
            self._stored.popitem(last=False)

    def _write_object(self, final_path: Path, body: bytes) -> None:
        data = gzip.compress(body, compresslevel=OBJECT_GZIP_LEVEL, mtime=0)
        tmp = final_path.with_name(f".{final_path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            # Held until the rename: the sweep of a starting worker deletes only
            # temporary files nobody holds (those of killed workers).
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            write_all(fd, data)
            os.replace(tmp, final_path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)

    def _append_line(self, line: bytes) -> None:
        self._file.rotate_if_due()
        current = self._file.current or self._file.open_new()
        self._file.append(current, line)  # O_APPEND, one piece: a whole line

    def _hand_over(self, path: Path) -> None:
        hand_over(self.on_finished, path)


def sweep_object_spool(directory: Path) -> list[Path]:
    """Recover and list an object spool (the uploader's ``sweep``): delete the
    temporary files of killed writers, finish their ``.cdxj.open`` files, and
    return the objects, then the finished index files (oldest first)."""
    if not directory.is_dir():
        return []
    removed = remove_stale_tmp_files(directory)
    if removed:
        logger.warning("Removed %d unfinished object(s) a killed worker left", removed)
    recovered = recover_open_indexes(directory)
    if recovered:
        logger.warning(
            "Recovered %d index file(s) a killed worker left in %s", len(recovered), directory
        )
    objects = sorted(p for p in directory.glob(f"*{OBJECT_SUFFIX}") if not p.name.startswith("."))
    indexes = sorted(directory.glob(f"*{INDEX_SUFFIX}"), key=_index_age_order)
    return objects + indexes


def remove_stale_tmp_files(directory: Path) -> int:
    """Delete the temporary object files no live writer holds; how many."""
    removed = 0
    for path in directory.glob(f".*{OBJECT_SUFFIX}.*{TMP_SUFFIX}"):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # renamed meanwhile by its writer
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer's
            path.unlink(missing_ok=True)
            removed += 1
        finally:
            os.close(fd)
    return removed


def recover_open_indexes(directory: Path) -> list[Path]:
    """Finish the ``.cdxj.open`` files killed writers left (module doc); the
    renamed paths. Skips files a live writer holds."""
    return rolling_recover(directory, INDEX_SUFFIX, "Index", _whole_lines)


def _whole_lines(fd: int, size: int) -> tuple[int, str]:
    good_bytes = _end_of_last_line(fd, size)
    return good_bytes, f"{good_bytes} bytes of whole lines"


def _end_of_last_line(fd: int, size: int) -> int:
    """Offset just past the file's last newline (0 if none), read backwards."""
    end = size
    while end > 0:
        start = max(0, end - RECOVERY_READ_BYTES)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _index_age_order(path: Path) -> tuple[str, str]:
    """Sort key: the UTC opening time in the name
    (``<prefix>-<yyyymmddHHMMSS>-<seq>.cdxj``), then the name."""
    parts = path.name.removesuffix(INDEX_SUFFIX).rsplit("-", 2)
    stamp = parts[1] if len(parts) == 3 and parts[1].isdigit() else ""
    return stamp, path.name
