"""The two body formats behind one interface (:class:`BodyWriter`), which is all
the storage pipeline (pipelines/store.py) calls.

``CRAWL_STORE_FORMAT`` picks the format (:func:`body_writer`):

* ``"warc"`` (:class:`WarcBodyWriter`): a response record and its request
  record in the worker's rolling WARC file (warc.py), and each redirect's 3xx
  as it is received (:meth:`BodyWriter.write_hop`); the item gains
  ``warc_file`` (the file's store key), ``warc_offset`` and ``warc_length``
  (the response record's gzip member, as a CDX index has them);
* ``"object"`` (:class:`ObjectBodyWriter`): a gzip object named after the
  body's digest, written once per distinct body, and a line in the worker's
  rolling CDXJ index (objects.py); redirects are not archived; the item gains
  ``body_key`` (the object's store key).

Each format has its own spool directory, its uploader (uploader.py, with the
format's store keys and spool recovery) and its rolling writer, finished by
size, by age, on :meth:`BodyWriter.rotate` or :meth:`BodyWriter.close`. The
calls block (disk I/O): the pipeline makes them in its writer thread
(writer_thread.py) or, for a small page, inline. Not thread-safe.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from scrapy.http import Response

from crawlproject.store.base import BodyStore
from crawlproject.store.config import (
    STORE_FORMAT_OBJECT,
    WIRE_ENCODING_META_KEY,
    BodyStoreConfig,
)
from crawlproject.store.hops import Hop
from crawlproject.store.index import build_index, index_bytes
from crawlproject.store.objects import ObjectWriter, store_key, sweep_object_spool
from crawlproject.store.rolling import RollingWriter
from crawlproject.store.uploader import SpoolUploader, UploadedCallback
from crawlproject.store.warc import (
    HttpExchange,
    Revisit,
    RollingWarcWriter,
    header_lines,
    http_reason,
)

FinishedCallback = Callable[[Path], None]


@dataclass(frozen=True, slots=True)
class PageToStore:
    """A kept page, as the pipeline hands it to the writer."""

    response: Response
    mime: str  # Content-Type without parameters, lowercased
    fetched_at: datetime
    digest: str  # the body's payload digest (crawlproject/body_digest.py)
    truncated: str | None = None  # WARC-Truncated: why the body is not all there
    revisit: Revisit | None = None  # a revisit record of a stored original (WARC format)


@dataclass(frozen=True, slots=True)
class StoredPage:
    """Where a page went: the item's new fields, and a counter of the format's own."""

    fields: dict[str, Any]
    stat: str | None = None


class BodyWriter(ABC):
    """One format's spool, uploader and writer (module doc)."""

    label: ClassVar[str]  # names the format in logs
    archives_redirects: ClassVar[bool] = False

    def __init__(self, config: BodyStoreConfig, crawl: str, worker: str) -> None:
        self.config = config
        self.crawl = crawl
        self.prefix = f"{crawl}-{worker}"  # of the writer's file names
        self._writer: RollingWriter | None = None

    @property
    @abstractmethod
    def spool(self) -> Path:
        """The spool directory (measured by backpressure.py)."""

    @property
    @abstractmethod
    def key_prefix(self) -> str:
        """What the store keys of this crawl's files start with."""

    @abstractmethod
    def _uploader_options(self) -> dict[str, Any]:
        """The format's SpoolUploader arguments: its store keys, its spool's recovery."""

    def uploader(self, store: BodyStore, on_uploaded: UploadedCallback) -> SpoolUploader:
        """The spool's uploader (not started)."""
        return SpoolUploader(
            store, self.spool, self.key_prefix, on_uploaded=on_uploaded, **self._uploader_options()
        )

    @abstractmethod
    def _open(self, on_finished: FinishedCallback) -> RollingWriter: ...

    @abstractmethod
    def write_page(self, page: PageToStore) -> StoredPage:
        """Writes the page's body; where it went."""

    def write_hop(self, hop: Hop) -> bool:
        """Writes a redirect's 3xx (formats that archive redirects); whether it was written."""
        return False

    def write_exchange(self, exchange: HttpExchange) -> bool:
        """Writes a rendered page's subresource (formats that archive them); whether it was."""
        return False

    def open(self, on_finished: FinishedCallback) -> None:
        """Starts the writer (after the uploader's start recovered the spool);
        ``on_finished(path)`` gets each file to upload, from the writing thread."""
        self._writer = self._open(on_finished)

    def rotate(self) -> Path | None:
        return self._writer.rotate() if self._writer is not None else None

    def rotate_if_due(self) -> Path | None:
        return self._writer.rotate_if_due() if self._writer is not None else None

    def close(self) -> Path | None:
        """Finishes the open file (handed to ``on_finished``); later writes are refused."""
        writer, self._writer = self._writer, None
        return writer.close() if writer is not None else None


class WarcBodyWriter(BodyWriter):
    label = "WARC"
    archives_redirects = True

    @property
    def spool(self) -> Path:
        return self.config.spool_dir(self.crawl)

    @property
    def key_prefix(self) -> str:
        return f"{self.crawl}/warc/"

    def _uploader_options(self) -> dict[str, Any]:
        # Each finished WARC file's CDXJ index is built beside it and uploaded after it.
        return {"index_builder": build_index, "index_data": index_bytes}

    def _open(self, on_finished: FinishedCallback) -> RollingWriter:
        return RollingWarcWriter(
            self.spool,
            prefix=self.prefix,
            max_file_bytes=self.config.rotate_bytes,
            max_file_seconds=self.config.rotate_seconds,
            warcinfo={"operator-crawl": self.crawl, "isPartOf": self.crawl},
            on_finished=on_finished,
        )

    def _warc(self) -> RollingWarcWriter:
        writer = self._writer
        if not isinstance(writer, RollingWarcWriter):
            raise RuntimeError("the WARC writer is not open")
        return writer

    def write_page(self, page: PageToStore) -> StoredPage:
        location = self._warc().write_exchanges([_page_exchange(page)])[0]
        return StoredPage(
            {
                "warc_file": self.key_prefix + location.filename,
                "warc_offset": location.offset,
                "warc_length": location.length,
            }
        )

    def write_hop(self, hop: Hop) -> bool:
        if self._writer is None:  # closed while this write waited for spool space
            return False
        self._warc().write_exchanges([_hop_exchange(hop)])
        return True

    def write_exchange(self, exchange: HttpExchange) -> bool:
        if self._writer is None:  # closed while this write waited for spool space
            return False
        self._warc().write_exchanges([exchange])
        return True


class ObjectBodyWriter(BodyWriter):
    label = "objects"

    @property
    def spool(self) -> Path:
        return self.config.object_spool_dir(self.crawl)

    @property
    def key_prefix(self) -> str:
        return f"{self.crawl}/"

    def _uploader_options(self) -> dict[str, Any]:
        return {"key_for": partial(store_key, self.key_prefix), "sweep": sweep_object_spool}

    def _open(self, on_finished: FinishedCallback) -> RollingWriter:
        return ObjectWriter(
            self.spool,
            prefix=self.prefix,
            key_prefix=self.key_prefix,
            max_index_bytes=self.config.rotate_bytes,
            max_index_seconds=self.config.rotate_seconds,
            on_finished=on_finished,
        )

    def write_page(self, page: PageToStore) -> StoredPage:
        writer = self._writer
        if not isinstance(writer, ObjectWriter):
            raise RuntimeError("the object writer is not open")
        response = page.response
        stored = writer.write_page(
            url=response.url,
            status=response.status,
            mime=page.mime,
            body=response.body,
            fetched_at=page.fetched_at,
            digest=page.digest,
        )
        written = "store/objects_written" if stored.written else "store/objects_already_stored"
        return StoredPage({"body_key": stored.key}, written)


def body_writer(config: BodyStoreConfig, crawl: str, worker: str) -> BodyWriter:
    """The writer of the format ``CRAWL_STORE_FORMAT`` names (not open yet)."""
    if config.store_format == STORE_FORMAT_OBJECT:
        return ObjectBodyWriter(config, crawl, worker)
    return WarcBodyWriter(config, crawl, worker)


def _page_exchange(page: PageToStore) -> HttpExchange:
    """The page's response and its request, as the WARC writer stores them."""
    response = page.response
    request = response.request
    ip = response.ip_address
    return HttpExchange(
        url=response.url,
        method=request.method if request is not None else "GET",
        request_headers=header_lines(request.headers) if request is not None else [],
        request_body=request.body if request is not None else b"",
        status=response.status,
        reason=http_reason(response.status),
        response_headers=_response_headers(response),
        body=response.body,
        fetched_at=page.fetched_at,
        ip_address=str(ip) if ip is not None else None,
        payload_digest=page.digest,
        truncated=page.truncated,
        revisit=page.revisit,
    )


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
        reason=http_reason(hop.status),
        response_headers=hop.headers,
        body=hop.body,
        fetched_at=hop.fetched_at,
        ip_address=hop.ip,
        truncated=hop.truncated,
    )
