"""Store each kept page's body (as WARC, or as one object per distinct body),
and say where in its item.

The spider hands the page's Response over in the item (``crawl_response``,
see crawlproject/store/config.py); this pipeline takes it out, so feeds never
see it, and for a content type it stores (``CRAWL_STORE_CONTENT_TYPES``)
writes the body to the local spool in the format ``CRAWL_STORE_FORMAT`` picks:

* ``"warc"``: a response record and its request record in the worker's
  rolling WARC file (crawlproject/store/warc.py). Each redirect's 3xx answer
  is written the same way when it is received (the ``redirect_received``
  signal of middlewares/redirect_hops.py; stat ``store/redirects``), whatever
  becomes of its target (already crawled, failed, a duplicate, not stored),
  so a replay tool finds the URL as linked too;
* ``"object"``: a gzip object named after the body's digest, written once per
  distinct body, and a line in the worker's rolling CDXJ index
  (crawlproject/store/objects.py), in ``<spool>/objects/``. This format does
  not archive redirects.

Finished files go to the body store (``CRAWL_STORE_URI``: a local directory by
default, or S3) through one uploader thread (crawlproject/store/uploader.py),
which keeps them spooled while the store is unreachable and picks up files a
killed worker left.

Runs after the duplicate filter (pipelines/dedupe.py at 100), so copies are
not stored. The item gains ``fetched_at``, ``final_url``, ``payload_digest``,
and for a stored page: as WARC, ``warc_file`` (its key in the store),
``warc_offset`` and ``warc_length`` (the response record's gzip member, as a
CDX index has them); as an object, ``body_key`` (the object's store key).
Small pages are written on the reactor thread (a thread hand-off costs more
than their gzip); large ones in a writer thread, so the reactor never waits
long.

Backpressure (crawlproject/store/backpressure.py): the spool is measured every
``CRAWL_STORE_SPOOL_CHECK_SECONDS``; over ``CRAWL_STORE_SPOOL_MAX_BYTES`` (or
under ``CRAWL_STORE_SPOOL_MIN_FREE_BYTES`` free) the engine is paused: no new
request starts, the ones in flight finish and are stored, the frontier keeps
renewing the worker's leases; it resumes once uploads have made room. A write
that fails for lack of space pauses the worker too, and the page waits in
this pipeline and is written again after the resume: its lease is acked only
after its items leave the pipelines (middlewares/frontier_ack.py), so it is
never acked unstored. Any other write error (EIO, EROFS, a spool directory
gone) raises ItemNotSaved (crawlproject/frontier/outcomes.py): the page goes
back to the frontier and the worker stops (``item_not_saved``), since it could
store nothing else either.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from itemadapter import ItemAdapter
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

from crawlproject.frontier.outcomes import ItemNotSaved
from crawlproject.frontier.scheduler import frontier_of, is_frontier
from crawlproject.frontier.wake import wake_engine
from crawlproject.store.backpressure import (
    Change,
    SpoolGate,
    SpoolUsage,
    is_space_error,
    measure_spool,
)
from crawlproject.store.config import (
    RESPONSE_ITEM_KEY,
    STORE_FORMAT_OBJECT,
    WIRE_ENCODING_META_KEY,
    BodyStoreConfig,
    StoreConfig,
)
from crawlproject.store.factory import open_store
from crawlproject.store.hops import Hop
from crawlproject.store.index import build_index, index_bytes
from crawlproject.store.objects import ObjectWriter, StoredObject, store_key, sweep_object_spool
from crawlproject.store.signals import redirect_received
from crawlproject.store.uploader import SpoolUploader
from crawlproject.store.warc import (
    HttpExchange,
    RollingWarcWriter,
    WarcLocation,
    header_lines,
    payload_digest,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

T = TypeVar("T")

# An idle writer's open file is checked this often (at most) for its age, so a
# quiet worker still finishes it after CRAWL_STORE_ROTATE_SECONDS.
ROTATION_CHECK_MAX_SECONDS = 30.0

# Bodies up to this size are written on the reactor thread (~0.16 ms CPU for
# 2.6 KB, bench/warc_write.py); larger ones in the writer thread.
INLINE_WRITE_MAX_BYTES = 64 * 1024

# The spool is measured at most this often: a scan of a huge spool (the object
# format's many files) must not cost more than a tenth of its thread's time.
SPOOL_CHECK_MIN_INTERVAL_PER_SCAN = 10.0
# While paused, the WARNING is repeated this often: a pause that lasts (a disk
# someone must clear, a store down for hours) stays visible in the log's tail.
PAUSE_REMINDER_SECONDS = 300.0


class BodyStorePipeline:
    def __init__(
        self,
        crawler: Crawler,
        config: BodyStoreConfig,
        store_config: StoreConfig,
        stats: StatsCollector,
        gate: SpoolGate,
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.store_config = store_config
        self.stats = stats
        self.gate = gate
        self._spool: Path | None = None  # the directory the gate measures
        self._watch_task: asyncio.Task[None] | None = None
        self._reminded_at = 0.0  # loop time of the last pause WARNING
        self._side_tasks: set[asyncio.Task[None]] = set()
        # Set while not paused: pages whose write failed for lack of space wait on it.
        self._running = asyncio.Event()
        self._running.set()
        self._writer: RollingWarcWriter | None = None
        self._objects: ObjectWriter | None = None  # the writer of the object format
        self._uploader: SpoolUploader | None = None
        self._key_prefix = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_thread = 0  # writes handed to the writer thread, not yet done
        self._rotation_task: asyncio.Task[None] | None = None
        # One thread: the writer is not thread-safe, and records stay in order.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warc-writer")
        # Sent by middlewares/redirect_hops.py (WARC format only).
        crawler.signals.connect(self._redirect_received, signal=redirect_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BodyStorePipeline:
        config = BodyStoreConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured("CRAWL_STORE_ENABLED is off")
        assert crawler.stats is not None
        return cls(
            crawler=crawler,
            config=config,
            store_config=StoreConfig.from_settings(crawler.settings),
            stats=crawler.stats,
            gate=SpoolGate(config.spool_max_bytes, config.spool_min_free_bytes),
        )

    async def open_spider(self) -> None:
        spider = self.crawler.spider
        crawl = str(getattr(spider, "crawl_name", None) or self.crawler.settings["CRAWL_NAME"])
        scheduler = self.crawler.engine.scheduler if self.crawler.engine else None
        worker = frontier_of(self.crawler).worker_id if is_frontier(scheduler) else "local"
        if self.config.store_format == STORE_FORMAT_OBJECT:
            await self._open_objects(crawl, worker)
            return
        spool = self.config.spool_dir(crawl)
        self._key_prefix = f"{crawl}/warc/"
        store = open_store(self.store_config)
        self._uploader = SpoolUploader(
            store,
            spool,
            self._key_prefix,
            on_uploaded=self._on_uploaded,
            index_builder=build_index,
            index_data=index_bytes,
        )
        loop = self._loop = asyncio.get_running_loop()
        # Start-up recovery reads leftover files: disk I/O, off the reactor.
        await loop.run_in_executor(self._executor, spool.mkdir, 0o777, True, True)
        await loop.run_in_executor(self._executor, self._uploader.start)
        self._writer = RollingWarcWriter(
            spool,
            prefix=f"{crawl}-{worker}",
            max_file_bytes=self.config.rotate_bytes,
            max_file_seconds=self.config.rotate_seconds,
            warcinfo={"operator-crawl": crawl, "isPartOf": crawl},
            on_finished=self._file_finished,
        )
        logger.info("Storing page bodies as WARC: spool %s, store %s", spool, store.uri)
        self._start_rotation_checks()
        self._start_spool_watch(spool)

    async def _open_objects(self, crawl: str, worker: str) -> None:
        spool = self.config.object_spool_dir(crawl)
        self._key_prefix = f"{crawl}/"
        store = open_store(self.store_config)
        self._uploader = SpoolUploader(
            store,
            spool,
            self._key_prefix,
            on_uploaded=self._on_uploaded,
            key_for=partial(store_key, self._key_prefix),
            sweep=sweep_object_spool,
        )
        loop = self._loop = asyncio.get_running_loop()
        # Start-up recovery reads leftover files: disk I/O, off the reactor.
        await loop.run_in_executor(
            self._executor, partial(spool.mkdir, parents=True, exist_ok=True)
        )
        await loop.run_in_executor(self._executor, self._uploader.start)
        self._objects = ObjectWriter(
            spool,
            prefix=f"{crawl}-{worker}",
            key_prefix=self._key_prefix,
            max_index_bytes=self.config.rotate_bytes,
            max_index_seconds=self.config.rotate_seconds,
            on_finished=self._file_finished,
        )
        logger.info("Storing page bodies as objects: spool %s, store %s", spool, store.uri)
        self._start_rotation_checks()
        self._start_spool_watch(spool)

    def _start_rotation_checks(self) -> None:
        self._rotation_task = asyncio.get_running_loop().create_task(self._rotate_when_due())

    async def _rotate_when_due(self) -> None:
        """Finishes the open file once it is old enough even when no page comes
        (writes check it too): a quiet worker's last pages still reach the store."""
        period = min(self.config.rotate_seconds / 4, ROTATION_CHECK_MAX_SECONDS)
        writer = self._writer or self._objects
        assert writer is not None
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period)
            # In the writer thread (a rename and fsyncs); counted as a write there,
            # so meanwhile no page is written inline by the reactor's thread.
            self._in_thread += 1
            try:
                await loop.run_in_executor(self._executor, writer.rotate_if_due)
            except OSError:
                logger.exception("Could not finish the open file; the next write retries")
            finally:
                self._in_thread -= 1

    # --- backpressure -------------------------------------------------------------------

    def _start_spool_watch(self, spool: Path) -> None:
        self._spool = spool
        if self.gate.max_bytes or self.gate.min_free_bytes:
            self._ensure_watching()

    def _ensure_watching(self) -> None:
        # Also started by a failed write with both limits off: only it resumes.
        if self._watch_task is None and self._spool is not None:
            self._watch_task = asyncio.get_running_loop().create_task(
                self._watch_spool(self._spool)
            )

    async def _watch_spool(self, spool: Path) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                usage = await asyncio.to_thread(measure_spool, spool)
            except OSError:
                logger.exception("Could not measure the spool %s", spool)
            else:
                self._apply(self.gate.check(usage), usage)
            scan_seconds = loop.time() - started
            await asyncio.sleep(
                max(
                    self.config.spool_check_seconds,
                    scan_seconds * SPOOL_CHECK_MIN_INTERVAL_PER_SCAN,
                )
            )

    def _apply(self, change: Change | None, usage: SpoolUsage) -> None:
        """Acts on the gate's decision; keeps the gauges `crawlproject status` shows."""
        self.stats.set_value("store/spool_bytes", usage.spooled_bytes)
        self.stats.set_value("store/backpressure_paused", int(self.gate.paused))
        self.stats.set_value("store/backpressure_seconds", round(self.gate.paused_seconds(), 3))
        engine = self.crawler.engine
        if change is Change.PAUSE:
            self._running.clear()
            self.stats.inc_value("store/backpressure_pauses")
            if engine is not None:
                engine.pause()
            logger.warning(
                "Paused taking new pages: %s (%d bytes in %d file(s) spooled in %s, "
                "%d file(s) waiting for upload); leases kept, resuming once uploads or "
                "freed disk space make room",
                self.gate.reason, usage.spooled_bytes, usage.files, self._spool,
                self._uploader.pending() if self._uploader is not None else 0,
            )  # fmt: skip
            # The open file can only be uploaded once finished: without this, a
            # cap near CRAWL_STORE_ROTATE_BYTES would hold the pause until it ages out.
            self._reminded_at = asyncio.get_running_loop().time()
            task = asyncio.get_running_loop().create_task(self._finish_open_file())
            self._side_tasks.add(task)  # held: the loop keeps only weak references
            task.add_done_callback(self._side_tasks.discard)
        elif change is None and self.gate.paused:
            now = asyncio.get_running_loop().time()
            if now - self._reminded_at >= PAUSE_REMINDER_SECONDS:
                self._reminded_at = now
                logger.warning(
                    "Still paused after %.0f s: %s (%d bytes spooled, %d bytes free)",
                    self.gate.current_pause_seconds(),
                    self.gate.reason, usage.spooled_bytes, usage.free_bytes,
                )  # fmt: skip
        elif change is Change.RESUME:
            if engine is not None:
                engine.unpause()
                wake_engine(self.crawler)  # else the engine's 5 s heartbeat restarts it
            self._running.set()
            logger.info(
                "Resumed taking new pages after %.1f s paused: the spool holds %d bytes "
                "(%d file(s)), %d bytes free",
                self.gate.last_pause_seconds, usage.spooled_bytes, usage.files, usage.free_bytes,
            )  # fmt: skip

    async def _finish_open_file(self) -> None:
        writer = self._writer or self._objects
        if writer is None:
            return
        self._in_thread += 1  # as in _rotate_when_due: no inline write meanwhile
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, writer.rotate)
        except OSError:
            logger.exception("Could not finish the open file; its rotation retries")
        finally:
            self._in_thread -= 1

    async def _write_when_room(self, write: Callable[..., T], url: str, size: int, *args: Any) -> T:
        """``_run_write`` of ``url`` (``size`` bytes of body); a write that fails
        for lack of space pauses the worker and is tried again once it
        resumes, so the page is neither lost nor acked unstored (module doc).
        Other write errors raise ItemNotSaved: the page goes back to the
        frontier and the worker stops."""
        while True:
            try:
                return await self._run_write(write, size, *args)
            except OSError as exc:
                self.stats.inc_value("store/write_failed")
                if not is_space_error(exc) or self._spool is None:
                    logger.error("Could not store %s: %s", url, exc)
                    raise ItemNotSaved(f"could not store {url}: {exc}") from exc
                usage = await asyncio.to_thread(measure_spool, self._spool)
                self._apply(self.gate.write_failed(usage), usage)
                self._ensure_watching()
                logger.debug("Storing %s waits for spool space (%s)", url, exc)
            await self._running.wait()

    # --- uploads ------------------------------------------------------------------------

    def _file_finished(self, path: Path) -> None:
        """A finished file goes to the uploader (from the writer's thread)."""
        assert self._uploader is not None
        self._uploader.submit(path)
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._note_pending)

    def _note_pending(self) -> None:
        # The storage lag, as `crawlproject status` shows it (a gauge).
        if self._uploader is not None:
            self.stats.set_value("store/files_pending", self._uploader.pending())

    def _on_uploaded(self, path: Any, key: str, size: int) -> None:
        # Called in the uploader thread: the stats belong to the reactor's.
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._count_upload, size)

    def _count_upload(self, size: int) -> None:
        self.stats.inc_value("store/files_uploaded")
        self.stats.inc_value("store/bytes_uploaded", size)
        self._note_pending()

    async def process_item(self, item: Any) -> Any:
        adapter = ItemAdapter(item)
        response = adapter.get(RESPONSE_ITEM_KEY)
        if RESPONSE_ITEM_KEY in adapter:
            del adapter[RESPONSE_ITEM_KEY]
        if not isinstance(response, Response) or (self._writer is None and self._objects is None):
            return item
        fetched_at = _fetched_at(adapter.get("fetched_at"))
        adapter["fetched_at"] = fetched_at.isoformat(timespec="microseconds")
        adapter["final_url"] = response.url
        digest = adapter["payload_digest"] = payload_digest(response.body)
        content_type = _content_type(response)
        if content_type not in self.config.content_types:
            self.stats.inc_value(f"store/skipped_content_type/{content_type or 'none'}")
            return item
        if self._objects is not None:
            stored = await self._write_when_room(
                self._write_object, response.url, len(response.body),
                response, content_type, fetched_at, digest,
            )  # fmt: skip
            adapter["body_key"] = stored.key
            self.stats.inc_value(
                "store/objects_written" if stored.written else "store/objects_already_stored"
            )
            self.stats.inc_value("store/pages")
            self.stats.inc_value("store/bytes", len(response.body))
            return item
        location = await self._write_when_room(
            self._write, response.url, len(response.body), response, fetched_at
        )
        adapter["warc_file"] = self._key_prefix + location.filename
        adapter["warc_offset"] = location.offset
        adapter["warc_length"] = location.length
        self.stats.inc_value("store/pages")
        self.stats.inc_value("store/bytes", len(response.body))
        return item

    async def _run_write(self, write: Callable[..., T], size: int, *args: Any) -> T:
        """``write(*args)``, both formats (``size``: the body's bytes): a small
        page at once, on the reactor's thread (cheaper than a hand-off,
        BENCHMARKS.md, and short enough not to hold the reactor); a large one
        (gzip takes ms) in the writer thread. While one is there every write
        goes there too, so records keep their order and the writer is never
        used by two threads."""
        if self._in_thread == 0 and size <= INLINE_WRITE_MAX_BYTES:
            return write(*args)
        self._in_thread += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, write, *args)
        finally:
            self._in_thread -= 1

    def _write_object(
        self, response: Response, content_type: str, fetched_at: datetime, digest: str
    ) -> StoredObject:
        assert self._objects is not None
        return self._objects.write_page(
            url=response.url,
            status=response.status,
            mime=content_type,
            body=response.body,
            fetched_at=fetched_at,
            digest=digest,
        )

    def _write(self, response: Response, fetched_at: datetime) -> WarcLocation:
        """Writes the page's response and request records; the page's location."""
        assert self._writer is not None
        request = response.request
        ip = response.ip_address
        return self._writer.write_exchange(
            url=response.url,
            method=request.method if request is not None else "GET",
            request_headers=header_lines(request.headers) if request is not None else [],
            request_body=request.body if request is not None else b"",
            status=response.status,
            reason=_reason(response.status),
            response_headers=_response_headers(response),
            body=response.body,
            fetched_at=fetched_at,
            ip_address=str(ip) if ip is not None else None,
        )

    async def _redirect_received(self, hop: Hop) -> None:
        """Writes a 3xx as it is received (the ``redirect_received`` signal),
        with the pages' machinery: a full spool pauses, the write waits."""
        if self._writer is None:  # not open yet, closed, or the object format
            return
        try:
            location = await self._write_when_room(self._write_hop, hop.url, len(hop.body), hop)
        except ItemNotSaved:
            # Logged; the next page's write fails the same way and stops the worker.
            return
        if location is not None:
            self.stats.inc_value("store/redirects")

    def _write_hop(self, hop: Hop) -> WarcLocation | None:
        writer = self._writer
        if writer is None:  # closed while this write waited for spool space
            return None
        return writer.write_exchanges([_hop_exchange(hop)])[0]

    async def close_spider(self) -> None:
        loop = asyncio.get_running_loop()
        for task in (self._rotation_task, self._watch_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.gate.paused:
            self.stats.set_value("store/backpressure_seconds", round(self.gate.paused_seconds(), 3))
        writer, self._writer = self._writer, None  # a redirect received now is not written
        if writer is not None:
            # Finishes the open file; on_finished hands it to the uploader.
            await loop.run_in_executor(self._executor, writer.close)
        if self._objects is not None:
            # Finishes the open index file, handed to the uploader after its objects.
            await loop.run_in_executor(self._executor, self._objects.close)
        if self._uploader is not None:
            left = await loop.run_in_executor(
                self._executor, self._uploader.close, self.config.close_timeout_seconds
            )
            if left:
                logger.warning(
                    "%d WARC file(s) not yet in the store stay spooled; the next worker "
                    "started here uploads them",
                    left,
                )
            self.stats.set_value("store/files_spooled_at_close", left)
        self._executor.shutdown(wait=True)


def _fetched_at(value: object) -> datetime:
    """The spider's fetch time (ISO 8601), or now for an item without one."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return datetime.now(UTC)


def _content_type(response: Response) -> str:
    raw = response.headers.get("Content-Type") or b""
    return raw.decode("latin-1").split(";", 1)[0].strip().lower()


def _response_headers(response: Response) -> list[tuple[str, str]]:
    """The headers as received: Content-Encoding comes back if Scrapy decoded
    the body and dropped it (the writer stores it as X-Crawler-Content-Encoding)."""
    headers = header_lines(response.headers)
    request = response.request
    wire_encoding = request.meta.get(WIRE_ENCODING_META_KEY) if request is not None else None
    if wire_encoding and b"Content-Encoding" not in response.headers:
        headers.append(("Content-Encoding", str(wire_encoding)))
    return headers


def _hop_exchange(hop: Hop) -> HttpExchange:
    # A redirect's request had no body: RedirectMiddleware follows a POST's
    # 307/308 with its body, but the crawler only sends GETs.
    return HttpExchange(
        url=hop.url,
        method=hop.method,
        request_headers=hop.request_headers,
        request_body=b"",
        status=hop.status,
        reason=_reason(hop.status),
        response_headers=hop.headers,
        body=hop.body,
        fetched_at=hop.fetched_at,
        ip_address=hop.ip,
        truncated=hop.truncated,
    )


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""
