"""Store each kept answer's body (as WARC, or as one object per distinct body),
and say where in its item: every status by default, 4xx and 5xx included
(``CRAWL_STORE_STATUSES`` narrows it; stat ``store/skipped_status/<status>``).

The spider hands the page's Response over in the item (``crawl_response``,
see crawlproject/store/config.py); this pipeline takes it out, so feeds never
see it, and for a content type it stores (``CRAWL_STORE_CONTENT_TYPES``)
writes the body to the local spool through the :class:`~crawlproject.store.
writers.BodyWriter` of the format ``CRAWL_STORE_FORMAT`` picks
(crawlproject/store/writers.py):

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

Finished files go to the body store (``CRAWL_STORE_URI``: local or S3) through
one uploader thread (crawlproject/store/uploader.py), which keeps them spooled
while the store is unreachable and picks up files a killed worker left.

Runs before the duplicate filter's pipeline (pipelines/dedupe.py: 50 < 100),
so a copy is archived too: a near copy whole, an exact copy (the same bytes)
as a revisit record, like a recrawl's unchanged page or 304
(crawlproject/store/revisit_choice.py; ``CRAWL_STORE_DUPLICATES``); an exact
copy's items dropped before the pipelines have their response written all the
same (the ``dropped_item_response`` signal). One response is written once,
however many items carry it; each gets that record's fields: ``fetched_at``,
``final_url``, ``payload_digest``, and for a stored page: as WARC,
``warc_file``, ``warc_offset`` and ``warc_length`` (the response record's gzip
member, as a CDX index has them); as an object, ``body_key``. Small pages are
written on the reactor thread, large ones in a writer thread
(crawlproject/store/writer_thread.py).

Backpressure (:class:`~crawlproject.store.backpressure.SpoolBackpressure`,
docs/storage.md): over ``CRAWL_STORE_SPOOL_MAX_BYTES`` the engine is paused
until uploads make room; a write that fails for lack of space waits here and
is written again after the resume (the lease is acked only after the items
leave the pipelines: middlewares/frontier_ack.py). Any other write error
raises ItemNotSaved (crawlproject/frontier/basics/outcomes.py): the page goes
back to the frontier and the worker stops (``item_not_saved``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from weakref import WeakKeyDictionary

from itemadapter import ItemAdapter
from scrapy.http import Response
from scrapy.utils.misc import load_object

from crawlproject.body_digest import body_sha1, payload_digest_of
from crawlproject.component_off import switched_off
from crawlproject.content import content_type_of
from crawlproject.dedupe.verdict import VERDICT_META_KEY, PageVerdict
from crawlproject.frontier.basics.outcomes import ItemNotSaved
from crawlproject.frontier.crawl.crawl_name import crawl_name
from crawlproject.frontier.scrapy_glue.engine_hooks import wake_engine
from crawlproject.frontier.scrapy_glue.frontier_lookup import (
    crawl_redis_of,
    frontier_of,
    is_frontier,
)
from crawlproject.redis_calls import DEFAULT_OUTAGE_SECONDS
from crawlproject.render.archive import archived_response
from crawlproject.store.backpressure import SpoolBackpressure, SpoolGate
from crawlproject.store.config import RESPONSE_ITEM_KEY, BodyStoreConfig, StoreConfig
from crawlproject.store.factory import open_store
from crawlproject.store.hops import TRUNCATED_DISCONNECT, Hop
from crawlproject.store.revisit_choice import NOT_MODIFIED, RevisitChooser
from crawlproject.store.revisits import LocalRevisitIndex, PayloadIndex, RevisitIndex
from crawlproject.store.signals import (
    dropped_item_response,
    redirect_received,
    render_resource_received,
)
from crawlproject.store.uploader import SpoolUploader
from crawlproject.store.writer_thread import WriterThread
from crawlproject.store.writers import BodyWriter, PageToStore, body_writer

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from crawlproject.store.warc import HttpExchange

logger = logging.getLogger(__name__)

T = TypeVar("T")
Fields = dict[str, Any]  # what a stored page gives each item carrying it

# Scrapy's flag of a body cut short by the connection (DOWNLOAD_FAIL_ON_DATALOSS off).
DATALOSS_FLAG = "dataloss"


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
        self._writer: BodyWriter | None = None  # set while open
        self._uploader: SpoolUploader | None = None
        self._backpressure: SpoolBackpressure | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = WriterThread()
        self._rotation_task: asyncio.Task[None] | None = None
        self._revisits: RevisitChooser | None = None  # WARC format only
        self._outage_seconds = DEFAULT_OUTAGE_SECONDS  # the scheduler's, once open
        # Sent by middlewares/redirect_hops.py, render_handler.py and dedupe.py.
        crawler.signals.connect(self._redirect_received, signal=redirect_received)
        crawler.signals.connect(self._resource_received, signal=render_resource_received)
        crawler.signals.connect(self._dropped_item_response, signal=dropped_item_response)
        self._writes: WeakKeyDictionary[Response, asyncio.Task[Fields]] = WeakKeyDictionary()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BodyStorePipeline:
        config = BodyStoreConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise switched_off(
                cls, crawler.settings, "CRAWL_STORE_ENABLED is off", "CRAWL_STORE_ENABLED"
            )
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
        crawl = crawl_name(spider, self.crawler.settings)  # the frontier's rule
        # The worker id names its files; the crawl's Redis has it once the frontier is open.
        on_frontier = is_frontier(load_object(self.crawler.settings["SCHEDULER"]))
        shared = crawl_redis_of(self.crawler) if on_frontier else None
        worker = shared.worker_id if shared is not None else "local"
        if on_frontier:  # the bound a failed engine wake closes within, read once
            self._outage_seconds = frontier_of(self.crawler).outage_seconds
        writer = body_writer(self.config, crawl, worker)
        store = open_store(self.store_config)
        self._uploader = writer.uploader(store, self._on_uploaded)
        self._loop = asyncio.get_running_loop()
        # Start-up recovery reads leftover files: disk I/O, off the reactor.
        await self._thread.run(partial(writer.spool.mkdir, parents=True, exist_ok=True))
        await self._thread.run(self._uploader.start)
        writer.open(self._file_finished)
        self._writer = writer
        if writer.archives_redirects:  # WARC: revisits (crawlproject/store/revisit_choice.py)
            index: PayloadIndex = (
                RevisitIndex(shared.redis, shared.keys)
                if shared is not None
                else LocalRevisitIndex()
            )
            self._revisits = RevisitChooser(index, self.config.duplicates, self.stats)
        logger.info(
            "Storing page bodies as %s: spool %s, store %s", writer.label, writer.spool, store.uri
        )
        self._rotation_task = self._loop.create_task(
            self._thread.rotate_when_due(writer, self.config.rotate_seconds)
        )
        self._backpressure = SpoolBackpressure(
            self.gate,
            writer.spool,
            self.config.spool_check_seconds,
            self.stats,
            pause=self._pause_engine,
            resume=self._resume_engine,
            pending_uploads=self._uploader.pending,
            finish_open_file=self._finish_open_file,
        )
        self._backpressure.start()

    def _pause_engine(self) -> None:
        if self.crawler.engine is not None:
            self.crawler.engine.pause()

    def _resume_engine(self) -> None:
        if self.crawler.engine is not None:
            self.crawler.engine.unpause()
            # Else the engine's 5 s heartbeat restarts it.
            wake_engine(self.crawler, self._outage_seconds)

    async def _finish_open_file(self) -> None:
        writer = self._writer
        if writer is None:
            return
        try:
            await self._thread.run(writer.rotate)
        except OSError:
            logger.exception("Could not finish the open file; its rotation retries")

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

    # --- pages and redirects ------------------------------------------------------------

    async def process_item(self, item: Any) -> Any:
        adapter = ItemAdapter(item)
        response = adapter.get(RESPONSE_ITEM_KEY)
        if RESPONSE_ITEM_KEY in adapter:
            del adapter[RESPONSE_ITEM_KEY]
        if isinstance(response, Response):
            adapter.update(await self._store_once(response, adapter.get("fetched_at")))
        return item

    async def _store_once(self, response: Response, fetched_at: object) -> Fields:
        """``response``'s one write's fields, however many items carry it."""
        write = self._writes.get(response)
        if write is None:
            write = asyncio.ensure_future(self._stored_fields(response, fetched_at))
            self._writes[response] = write
        return dict(await write)

    async def _stored_fields(self, response: Response, fetched_at: object) -> Fields:
        fields: Fields = {} if fetched_at is None else {"fetched_at": fetched_at}
        await self._store(response, fields)
        return fields

    async def _dropped_item_response(self, response: Response, fetched_at: object) -> None:
        """Writes the page of items the duplicate filter dropped (the signal
        ``dropped_item_response``) as for an item: once, however many carried it."""
        if not isinstance(response, Response):
            return
        try:
            await self._store_once(response, fetched_at)
        except ItemNotSaved:
            return  # logged; the next page's write fails the same way and stops the worker

    async def _store(self, response: Response, fields: MutableMapping[str, Any]) -> None:
        """Stores a page; ``fields``: its item's (a dropped one's: a stand-in)."""
        writer = self._writer
        if writer is None:
            return
        # A rendered page as the server sent it (scripts beside it), not the DOM.
        response = archived_response(response)
        fetched_at = _fetched_at(fields.get("fetched_at"))
        fields["fetched_at"] = fetched_at.isoformat(timespec="microseconds")
        fields["final_url"] = response.url
        sha1 = body_sha1(response)
        digest = fields["payload_digest"] = payload_digest_of(sha1)
        if response.status not in self.config.statuses:  # CRAWL_STORE_STATUSES
            self.stats.inc_value(f"store/skipped_status/{response.status}")
            return
        content_type = content_type_of(response)
        # No body (204, HEAD, an empty error page): stored whatever its type.
        if content_type not in self.config.content_types and response.body:
            self.stats.inc_value(f"store/skipped_content_type/{content_type or 'none'}")
            return
        truncated = TRUNCATED_DISCONNECT if DATALOSS_FLAG in response.flags else None
        if response.status == NOT_MODIFIED and self._revisits is None:
            return  # the object format: the body is where the last 2xx stored it
        choice = None
        if self._revisits is not None and truncated is None:
            verdict = response.meta.get(VERDICT_META_KEY)  # middlewares/dedupe.py's
            copy = isinstance(verdict, PageVerdict) and verdict.kind is not None
            choice = await self._revisits.choose(response, sha1, fetched_at, copy)
            if not choice.store:
                return
        revisit = choice.revisit if choice is not None else None
        page = PageToStore(response, content_type, fetched_at, digest, truncated, revisit)
        try:
            stored = await self._write(
                partial(writer.write_page, page), response.url, response.body
            )
        except ItemNotSaved:
            if choice is not None and choice.claimed and self._revisits is not None:
                await self._revisits.release(response, sha1, fetched_at)
            raise
        fields.update(stored.fields)
        if stored.stat is not None:
            self.stats.inc_value(stored.stat)
        if revisit is None:
            self.stats.inc_value("store/pages")
            self.stats.inc_value("store/bytes", len(response.body))

    async def _write(self, call: Callable[[], T], url: str, body: bytes) -> T:
        """``call()`` (writing ``body``) in the writer thread's way, waiting for
        spool space if it fails for lack of it (module doc); any other write
        error raises ItemNotSaved: the page goes back to the frontier and the
        worker stops."""
        assert self._backpressure is not None
        try:
            return await self._backpressure.write_when_room(
                partial(self._thread.write, call, len(body)), url
            )
        except OSError as exc:
            logger.error("Could not store %s: %s", url, exc)
            raise ItemNotSaved(f"could not store {url}: {exc}") from exc

    async def _redirect_received(self, hop: Hop) -> None:
        """Writes a 3xx as it is received (the ``redirect_received`` signal),
        with the pages' machinery: a full spool pauses, the write waits."""
        writer = self._writer
        if writer is None or not writer.archives_redirects:  # not open, closed, or objects
            return
        if hop.status not in self.config.statuses:  # CRAWL_STORE_STATUSES
            self.stats.inc_value(f"store/skipped_status/{hop.status}")
            return
        try:
            written = await self._write(partial(writer.write_hop, hop), hop.url, hop.body)
        except ItemNotSaved:
            # Logged; the next page's write fails the same way and stops the worker.
            return
        if written:
            self.stats.inc_value("store/redirects")

    async def _resource_received(self, exchange: HttpExchange) -> None:
        """Writes a rendered page's subresource (``render_resource_received``)
        as a response record of its own, so the page replays as it was seen."""
        writer = self._writer
        if writer is None or not writer.archives_redirects:  # not open, closed, or objects
            return
        try:
            written = await self._write(
                partial(writer.write_exchange, exchange), exchange.url, exchange.body
            )
        except ItemNotSaved:
            return  # logged; the next page's write fails the same way and stops the worker
        if written:
            self.stats.inc_value("store/render_resources")

    async def close_spider(self) -> None:
        if self._rotation_task is not None:
            self._rotation_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rotation_task
        if self._backpressure is not None:
            await self._backpressure.stop()
        writer, self._writer = self._writer, None  # a redirect received now is not written
        if writer is not None:
            # Finishes the open file; on_finished hands it to the uploader.
            await self._thread.run(writer.close)
        if self._uploader is not None:
            left = await self._thread.run(
                partial(self._uploader.close, self.config.close_timeout_seconds)
            )
            if left:
                logger.warning(
                    "%d WARC file(s) not yet in the store stay spooled; the next worker "
                    "started here uploads them",
                    left,
                )
            self.stats.set_value("store/files_spooled_at_close", left)
        self._thread.shutdown()


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
