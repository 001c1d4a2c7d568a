"""Finished WARC files from the local spool directory to the body store.

A worker's :class:`~crawlproject.store.warc.RollingWarcWriter` writes into a
spool directory on local disk; :class:`SpoolUploader` moves each finished file
to a :class:`~crawlproject.store.base.BodyStore` (key ``key_prefix +
file name``) and deletes the local copy once the store holds it. Store calls
block (disk or network), so they all run in one background thread: the Scrapy
reactor only calls :meth:`SpoolUploader.submit`, which never waits on I/O.

The spool is the safety net, so a file leaves it only after a successful
``put_file``:

* the store unreachable (:class:`StoreUnavailable`, raised after the store's
  own bounded retries): the file stays, the uploader waits with jittered
  exponential backoff and retries the same file; files go up oldest first, and
  the ones finished meanwhile wait on disk;
* the store refusing (:class:`StoreError`: no such bucket, access denied): an
  ERROR is logged once per kind of refusal, the file stays, and the uploader
  retries at the longest interval, since an operator may fix the store;
* anything else (a bug, a local file that cannot be read): logged with its
  traceback once per kind, the file stays, backoff as for an outage.

A worker that stops normally closes its writer first (which finishes the open
file and submits it), then calls :meth:`SpoolUploader.close` with a deadline.
Whatever is still spooled then, and whatever a killed worker left (``.open``
files, which :func:`recover_open_files` makes readable), is uploaded by the
next :meth:`SpoolUploader.start` on the same spool directory.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

from crawlproject.store.backpressure import is_space_error
from crawlproject.store.base import BodyStore, check_key
from crawlproject.store.errors import StoreError, StoreUnavailable
from crawlproject.store.index import INDEX_SUFFIX
from crawlproject.store.warc import WARC_SUFFIX
from crawlproject.store.warc_recovery import finished_files, recover_open_files

logger = logging.getLogger(__name__)

# A backoff wait is this fraction to all of its nominal length, so workers that
# lost the store at the same moment do not come back in step.
BACKOFF_JITTER_MIN_FRACTION = 0.5
BACKOFF_MAX_DOUBLINGS = 40
# The thread's name, for thread dumps and log formats that show it.
THREAD_NAME = "warc-uploader"

UploadedCallback = Callable[[Path, str, int], None]
# recover_and_list(spool_dir) -> the spool's finished files, in upload order.
SpoolSweep = Callable[[Path], list[Path]]


class SpoolUploader:
    """Uploads finished WARC files of ``spool_dir`` to ``store``, in one thread.

    ``index_builder(path) -> index path``, when given, writes the index of a
    finished file beside it (crawlproject/store/index.py); it is uploaded
    after the file, under the same prefix, and both leave the spool together.
    ``index_data(path) -> bytes`` is the same index in memory, used when the
    spool's disk is too full to write it: else a full disk could never drain.

    ``key_for(path) -> key`` names a file's object in the store (default:
    ``key_prefix + path.name``). ``sweep(spool_dir)``, run by :meth:`start`,
    recovers what killed writers left and returns the finished files already
    spooled, in upload order (default: :func:`recover_open_files`, then the
    finished WARC files, oldest first). Both let a spool of another layout
    (crawlproject/store/objects.py) reuse this uploader.

    ``on_uploaded(path, key, size_bytes)`` is called after each upload, once
    the local file is deleted, **from the uploader thread**: a callback that
    touches reactor state must hand over with ``reactor.callFromThread``. An
    exception it raises is logged and ignored (the file is in the store).

    Several workers may share a spool directory: recovery skips the files a
    live writer holds, and a file that another uploader moved away first is
    dropped from the queue with a warning (``put_file`` is idempotent, so an
    object put twice is harmless).
    """

    def __init__(
        self,
        store: BodyStore,
        spool_dir: Path,
        key_prefix: str,
        retry_initial_seconds: float = 1.0,
        retry_max_seconds: float = 60.0,
        on_uploaded: UploadedCallback | None = None,
        index_builder: Callable[[Path], Path] | None = None,
        index_data: Callable[[Path], bytes] | None = None,
        key_for: Callable[[Path], str] | None = None,
        sweep: SpoolSweep | None = None,
    ) -> None:
        if key_prefix:
            # Refused now rather than as a retried failure of every upload.
            check_key(key_prefix + "file.warc.gz")
        if not 0 < retry_initial_seconds <= retry_max_seconds:
            raise ValueError(
                "need 0 < retry_initial_seconds <= retry_max_seconds, got "
                f"{retry_initial_seconds} and {retry_max_seconds}"
            )
        self.store = store
        self.spool_dir = spool_dir
        self.key_prefix = key_prefix
        self.retry_initial_seconds = retry_initial_seconds
        self.retry_max_seconds = retry_max_seconds
        self.on_uploaded = on_uploaded
        self.index_builder = index_builder
        self.index_data = index_data
        self.key_for = key_for
        self.sweep = sweep if sweep is not None else _sweep_warc_spool
        # Guards every field below; notified when a file is queued or close() begins.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: deque[Path] = deque()  # oldest first; the head is in flight
        self._queued: set[Path] = set()
        self._closing = False
        self._uploaded_files = 0
        self._uploaded_bytes = 0
        self._last_error: str | None = None
        # Set when close() gives up waiting: cuts a backoff wait short.
        self._abort = threading.Event()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"SpoolUploader({self.spool_dir} -> {self.store.uri}{self.key_prefix})"

    # --- the caller's side (any thread) ----------------------------------------------

    def start(self) -> None:
        """Recover the ``.open`` files killed workers left, queue every finished
        file already spooled, start the thread.

        Runs recovery in the caller's thread, on purpose: it must be done before
        this worker's writer opens its first file, or a recovered file and a
        new one of the same name could race on the rename. It reads each
        ``.open`` file through (local disk I/O, no store call).
        """
        with self._lock:
            if self._thread is not None or self._closing:
                raise RuntimeError(f"{self!r} already started or closed")
        spooled = self.sweep(self.spool_dir)
        with self._lock:
            # Files submitted before start() go after the older spooled ones.
            swept = set(spooled)
            earlier = [path for path in self._queue if path not in swept]
            self._queue = deque(spooled + earlier)
            self._queued = set(self._queue)
            count = len(self._queue)
            self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._thread.start()
        logger.info("%r started; %d file(s) spooled", self, count)

    def submit(self, path: Path) -> None:
        """Queue a finished file (thread-safe, no I/O): a writer's ``on_finished``.

        After :meth:`close`, the file is not queued; it stays in the spool for
        the next :meth:`start`.
        """
        with self._changed:
            if self._closing:
                logger.warning("%s finished after close(); left for the next start", path)
                return
            if path in self._queued:
                return
            self._queue.append(path)
            self._queued.add(path)
            self._changed.notify()

    def pending(self) -> int:
        """Files waiting for upload (the one in flight included)."""
        with self._lock:
            return len(self._queue)

    @property
    def uploaded_files(self) -> int:
        with self._lock:
            return self._uploaded_files

    @property
    def uploaded_bytes(self) -> int:
        with self._lock:
            return self._uploaded_bytes

    @property
    def last_error(self) -> str | None:
        """The latest failure, or None once an upload succeeded after it."""
        with self._lock:
            return self._last_error

    @property
    def running(self) -> bool:
        """Whether the thread is alive (it may outlive close() in a hung put_file)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def close(self, timeout_seconds: float) -> int:
        """Stop accepting files, upload what is queued until done or
        ``timeout_seconds`` passed, stop the thread; return how many files are
        left in the spool (the next :meth:`start` uploads them).

        Returns within about ``timeout_seconds``: a backoff wait is cut short.
        A ``put_file`` in flight cannot be interrupted and takes its own
        bounded time (for S3: the store's retries and botocore's timeouts);
        the thread is a daemon thread and finishes it alone, so that file may
        still leave the spool after close() returned. A put cut off by process
        exit leaves the local file in place (and, on S3, maybe an incomplete
        multipart upload for the bucket's lifecycle rule to clear).
        """
        with self._changed:
            self._closing = True
            self._changed.notify()
        thread = self._thread
        if thread is not None:
            thread.join(max(0.0, timeout_seconds))
            if thread.is_alive():
                self._abort.set()
                # A thread in a backoff wait exits at once; one in put_file does not.
                thread.join(0.1)
        left = self.pending()
        if left:
            logger.warning("%r closed with %d file(s) left in %s", self, left, self.spool_dir)
        else:
            logger.info("%r closed; spool empty", self)
        return left

    # --- the uploader thread ---------------------------------------------------------

    def _run(self) -> None:
        failures = 0  # in a row, for the backoff
        reported: set[str] = set()  # kinds of failure logged at ERROR since the last success
        while not self._abort.is_set():
            with self._changed:
                while not self._queue and not self._closing:
                    self._changed.wait()
                if not self._queue:  # closing, and nothing left
                    return
                path = self._queue[0]
            try:
                self._upload(path)
            except StoreUnavailable as exc:
                failures += 1
                self._failed(exc, reported, failures, self._backoff(failures), traceback=False)
            except StoreError as exc:
                failures += 1
                self._failed(exc, reported, failures, self.retry_max_seconds, traceback=False)
            except Exception as exc:
                failures += 1
                self._failed(exc, reported, failures, self._backoff(failures), traceback=True)
            else:
                if failures:
                    logger.info(
                        "Uploads to %s resumed after %d failed attempt(s); %d file(s) pending",
                        self.store.uri, failures, self.pending(),
                    )  # fmt: skip
                failures = 0
                reported.clear()

    def _backoff(self, failures: int) -> float:
        # The exponent is capped: a day-long outage must not overflow the float.
        exponent = min(failures - 1, BACKOFF_MAX_DOUBLINGS)
        return min(self.retry_max_seconds, self.retry_initial_seconds * 2.0**exponent)

    def _upload(self, path: Path) -> None:
        """Put ``path`` (and its index, with an index_builder) and drop them from
        the spool; raises with the files kept."""
        key = self.key_for(path) if self.key_for is not None else self.key_prefix + path.name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            logger.warning("%s is gone from the spool (another uploader took it?)", path)
            self._dequeue(path)
            return
        # The index is built from the finished file here, in this thread, so a
        # file recovered from a killed worker gets one too; WARC first, then its
        # index: an index never names a file the store does not have.
        index: Path | None = None
        in_memory: bytes | None = None
        if self.index_builder is not None:
            try:
                index = self.index_builder(path)
            except OSError as exc:
                if not (is_space_error(exc) and self.index_data is not None):
                    raise
                in_memory = self.index_data(path)
        self.store.put_file(path, key)
        if index is not None:
            self.store.put_file(index, self.key_prefix + index.name)
        if in_memory is not None:
            self.store.put_bytes(self.key_prefix + path.name + INDEX_SUFFIX, in_memory)
        for done in (path, index):
            if done is None:
                continue
            try:
                done.unlink()
            except FileNotFoundError:
                pass  # another uploader sharing the spool was as quick: same object
            except OSError:
                # The store has it; the next start uploads the leftover again.
                logger.exception("%s uploaded but not deleted", done)
        with self._lock:
            self._uploaded_files += 1
            self._uploaded_bytes += size
            self._last_error = None
        self._dequeue(path)
        logger.info("%s uploaded to %s%s (%d bytes)", path.name, self.store.uri, key, size)
        if self.on_uploaded is not None:
            try:
                self.on_uploaded(path, key, size)
            except Exception:
                logger.exception("on_uploaded failed for %s", path)

    def _dequeue(self, path: Path) -> None:
        with self._lock:
            if self._queue and self._queue[0] == path:
                self._queue.popleft()
            self._queued.discard(path)

    def _failed(
        self,
        exc: Exception,
        reported: set[str],
        failures: int,
        delay_seconds: float,
        traceback: bool,
    ) -> None:
        description = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self._last_error = description
            waiting = len(self._queue)
        kind = _failure_kind(exc)
        wait = delay_seconds * random.uniform(BACKOFF_JITTER_MIN_FRACTION, 1.0)
        if isinstance(exc, StoreUnavailable):
            # An outage is expected weather, not a fault: a warning per attempt.
            logger.warning(
                "Store %s unavailable (%s); %d file(s) kept in %s, retry in %.2f s",
                self.store.uri, exc, waiting, self.spool_dir, wait,
            )  # fmt: skip
        elif kind not in reported:
            reported.add(kind)
            logger.error(
                "Upload to %s failed (%s); %d file(s) kept in %s, retrying every ~%.0f s",
                self.store.uri, description, waiting, self.spool_dir, delay_seconds,
                exc_info=exc if traceback else None,
            )  # fmt: skip
        else:
            logger.debug("Upload failed again (%d in a row): %s", failures, description)
        self._abort.wait(wait)


def _failure_kind(exc: BaseException) -> str:
    """What makes two failures "the same" for logging: the exception types and,
    for botocore's errors, the S3 error code (messages name the key: too fine)."""
    parts = [type(exc).__name__]
    cause = exc.__cause__
    if cause is not None:
        parts.append(type(cause).__name__)
        # boto3's S3UploadFailedError wraps the ClientError that has the code.
        inner = cause.__context__ if cause.__context__ is not None else cause
        response = getattr(inner, "response", None)
        if isinstance(response, dict):
            parts.append(str(response.get("Error", {}).get("Code", "")))
    return ":".join(parts)


def _sweep_warc_spool(spool_dir: Path) -> list[Path]:
    """The default sweep: recover the ``.open`` WARC files, list the finished ones."""
    recovered = recover_open_files(spool_dir)
    if recovered:
        logger.warning(
            "Recovered %d WARC file(s) a killed worker left in %s", len(recovered), spool_dir
        )
    return sorted(finished_files(spool_dir), key=_age_order)


def _age_order(path: Path) -> tuple[str, str]:
    """Sort key: the UTC opening time in a writer's file name
    (``<prefix>-<yyyymmddHHMMSS>-<seq>.warc.gz``), then the name; plain name
    order would put all of one worker's files before another's."""
    parts = path.name.removesuffix(WARC_SUFFIX).rsplit("-", 2)
    stamp = parts[1] if len(parts) == 3 and parts[1].isdigit() else ""
    return stamp, path.name
