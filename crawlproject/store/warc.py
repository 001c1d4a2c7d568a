"""Page bodies on local disk: one worker's rolling WARC files, and their crash recovery.

Each fetched page becomes a ``response`` record (or a ``revisit`` record naming
a stored original: :class:`Revisit`, crawlproject/store/revisits.py) followed by
its ``request`` record (WARC/1.1), each its own gzip member, so a reader seeks
straight to one page with the (offset, length) a CDX index stores. The redirects that led to a page
are exchanges of their own, written before it in the same write
(:meth:`RollingWarcWriter.write_exchanges`; a redirect whose body was left out
says so with ``WARC-Truncated``). A file is written as
``<prefix>-<UTC yyyymmddHHMMSS>-<seq>.warc.gz.open`` and renamed to ``.warc.gz``
when finished (by size, by age, on :meth:`RollingWarcWriter.close`); only
finished files go to a store (the uploader learns of them through ``on_finished``).

Decisions a reader of these files should know:

* Bodies are stored decoded, as Scrapy saw them. The header lines that describe
  the wire form of the body would make readers decode it a second time, so they
  are renamed the way Common Crawl's WARC files do it: ``Content-Encoding`` and
  ``Transfer-Encoding`` become ``X-Crawler-Content-Encoding`` and
  ``X-Crawler-Transfer-Encoding`` (same place, same value), and a
  ``Content-Length`` that is not the stored body's length becomes
  ``X-Crawler-Content-Length``, with a correct ``Content-Length`` appended.
  Every other header line is stored as given, latin-1 encoded (the lossless
  inverse of decoding raw header bytes as latin-1; characters above U+00FF fall
  back to UTF-8). warcio's own writer would %-encode non-ASCII header values,
  so the HTTP block is built here and warcio writes it unchanged: it computes
  the WARC-Block-Digest, this module the WARC-Payload-Digest (SHA-1 of the body).
* Durability: ``write_exchange`` returns after the bytes are in the kernel (one
  unbuffered write), which survives the worker being killed, even with
  ``kill -9``, but not the machine losing power. fsync per page costs a disk
  flush per page; the copy that must survive a lost machine is the uploaded
  one, so by default only a finished file is fsynced (before its rename).
  ``fsync_each_write=True`` buys power-loss safety per page at that cost.
* Recovery (warc_recovery.py): every complete gzip member of a file
  left ``.open`` is kept, the torn tail is cut off. A response whose request
  record was lost keeps its place: the response is the page. A file left with
  no record but its warcinfo holds no page and is deleted.

A writer holds an exclusive ``flock`` on its open file, so recovery skips files
that a live writer (another worker sharing the directory) still writes.
The writer is not thread-safe: one writer, one thread.
"""

from __future__ import annotations

import http
import io
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import (
    StatusAndHeaders,
    StatusAndHeadersParser,
)
from warcio.warcwriter import WARCWriter

from crawlproject.body_digest import payload_digest
from crawlproject.default_settings import CRAWL_STORE_ROTATE_BYTES, CRAWL_STORE_ROTATE_SECONDS
from crawlproject.store.rolling import RollingFile, RollingWriter

logger = logging.getLogger(__name__)

WARC_VERSION = "WARC/1.1"
WARC_SUFFIX = ".warc.gz"
CONFORMS_TO = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"

_RESPONSE_CONTENT_TYPE = "application/http; msgtype=response"
_REQUEST_CONTENT_TYPE = "application/http; msgtype=request"
_WIRE_HEADERS = {
    "content-encoding": "X-Crawler-Content-Encoding",
    "transfer-encoding": "X-Crawler-Transfer-Encoding",
}
_WIRE_LENGTH_HEADER = "X-Crawler-Content-Length"


@dataclass(frozen=True, slots=True)
class WarcLocation:
    """Where a page's response record is: what a CDX line stores."""

    filename: str  # final name (``.warc.gz``), also while the file is still ``.open``
    offset: int  # of the response record's gzip member, in bytes
    length: int  # of that member (compressed bytes)


@dataclass(frozen=True, slots=True)
class HttpExchange:
    """One request and its response, as :meth:`RollingWarcWriter.write_exchanges` stores them."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int
    reason: str
    response_headers: list[tuple[str, str]]  # as received: see the module doc
    body: bytes  # decoded
    fetched_at: datetime
    ip_address: str | None = None
    # WARC-Truncated of the response record: why its body is not all there
    # (a redirect's body left out, crawlproject/store/hops.py).
    truncated: str | None = None
    # The body's WARC-Payload-Digest when the caller has it already
    # (crawlproject/body_digest.py: hashed once per response); else hashed here.
    payload_digest: str | None = None
    # Written as a revisit record of this original (no body), not a response.
    revisit: Revisit | None = None


@dataclass(frozen=True, slots=True)
class Revisit:
    """What a revisit record names: its profile and the stored original
    (crawlproject/store/revisits.py)."""

    profile: str
    refers_to_uri: str
    refers_to_date: datetime
    digest: str  # the original's payload digest
    # Server-not-modified: the record holds no HTTP head, so that a replay
    # tool takes the original's (docs/storage.md: revisits).
    with_head: bool = True


def _revisit_headers(revisit: Revisit) -> list[tuple[str, str]]:
    return [
        ("WARC-Profile", revisit.profile),
        ("WARC-Refers-To-Target-URI", revisit.refers_to_uri),
        ("WARC-Refers-To-Date", warc_date(revisit.refers_to_date)),
    ]


def http_reason(status: int) -> str:
    """The reason phrase a status line is written with ("" for an unknown status)."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def header_lines(headers: Any) -> list[tuple[str, str]]:
    """Scrapy's Headers (bytes, several values per name) as the (name, value)
    lines records are written from, latin-1 decoded (lossless)."""
    return [
        (name.decode("latin-1"), value.decode("latin-1"))
        for name, values in headers.items()
        for value in values
    ]


def warc_date(moment: datetime) -> str:
    """WARC/1.1 date, always with microseconds; a naive datetime is taken as UTC."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stored_response_headers(
    headers: Iterable[tuple[str, str]], body_length: int
) -> list[tuple[str, str]]:
    """The response header lines as stored beside a decoded body (module doc)."""
    stored: list[tuple[str, str]] = []
    length_wrong = False
    for name, value in headers:
        lower = name.lower()
        if lower in _WIRE_HEADERS:
            stored.append((_WIRE_HEADERS[lower], value))
        elif lower == "content-length" and value.strip() != str(body_length):
            stored.append((_WIRE_LENGTH_HEADER, value))
            length_wrong = True
        else:
            stored.append((name, value))
    if length_wrong:
        stored.append(("Content-Length", str(body_length)))
    return stored


def _encode_header_text(text: str) -> bytes:
    # CR or LF inside a line would end it early and corrupt the whole HTTP block.
    text = text.replace("\r", " ").replace("\n", " ")
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def _http_head(start_line: str, headers: Iterable[tuple[str, str]]) -> bytes:
    lines = [_encode_header_text(start_line)]
    lines.extend(_encode_header_text(f"{name}: {value}") for name, value in headers)
    lines.append(b"")
    lines.append(b"")
    return b"\r\n".join(lines)


def _request_target(url: str) -> tuple[str, str]:
    """(origin-form request target, Host value) of an absolute URL."""
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    return target, parts.netloc.rpartition("@")[2]


def _software() -> str:
    try:
        version = metadata.version("crawlproject")
    except metadata.PackageNotFoundError:
        version = "dev"
    return f"crawlproject/{version} (warcio {metadata.version('warcio')})"


class RollingWarcWriter(RollingWriter):
    """One worker's WARC files in ``directory``, named after ``prefix``.

    ``write_exchange`` appends one page and returns its :class:`WarcLocation` once
    the bytes are on disk (module doc: durability). Before a write, a file that
    has reached ``max_file_bytes`` or is ``max_file_seconds`` old (on ``clock``)
    is finished: renamed from ``.open`` to ``.warc.gz``, then ``on_finished`` is
    called with its path. ``rotate()``, ``rotate_if_due()`` (for an idle timer:
    age is otherwise checked only at a write) and ``close()`` finish it too, and
    return the path. An exception from ``on_finished`` is logged, not raised: the
    file is final on disk by then, and the write that triggered the rotation must
    not fail for an upload problem; the uploader should also sweep the directory
    for finished files at start (warc_recovery.py). The file itself is a
    :class:`~crawlproject.store.rolling.RollingFile`.
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        max_file_bytes: int = CRAWL_STORE_ROTATE_BYTES,
        max_file_seconds: float = CRAWL_STORE_ROTATE_SECONDS,
        warcinfo: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_finished: Callable[[Path], None] | None = None,
        fsync_each_write: bool = False,
    ) -> None:
        self._file = RollingFile(
            directory, prefix, WARC_SUFFIX, max_file_bytes, max_file_seconds, "WARC", clock,
            on_finished,
        )  # fmt: skip
        self.warcinfo = dict(warcinfo or {})
        self.fsync_each_write = fsync_each_write
        self._warcinfo_id = ""  # of the open file
        # One reusable buffer: records are serialized here, then written to the
        # file with one write, so offsets are known and a member is never split
        # across two writes of ours.
        self._buffer = io.BytesIO()
        self._warc = WARCWriter(self._buffer, gzip=True, warc_version=WARC_VERSION)

    @property
    def open_path(self) -> Path | None:
        current = self._file.current
        return current.path if current else None

    def write_exchange(
        self,
        url: str,
        method: str,
        request_headers: list[tuple[str, str]],
        request_body: bytes,
        status: int,
        reason: str,
        response_headers: list[tuple[str, str]],
        body: bytes,
        fetched_at: datetime,
        ip_address: str | None = None,
    ) -> WarcLocation:
        exchange = HttpExchange(
            url, method, request_headers, request_body, status, reason, response_headers, body,
            fetched_at, ip_address,
        )  # fmt: skip
        return self.write_exchanges([exchange])[0]

    def write_exchanges(self, exchanges: Sequence[HttpExchange]) -> list[WarcLocation]:
        """Appends the exchanges' records in order with one write; the
        location of each response record."""
        if not exchanges:
            return []
        self._file.rotate_if_due()
        self._take_buffer()  # drop what a write that raised half-way left behind
        current = self._file.current or self._file.open_new(self._warcinfo_record)
        spans = []
        for exchange in exchanges:
            start = self._buffer.tell()
            spans.append((start, self._serialize_exchange(exchange) - start))
        offset = self._file.append(current, self._take_buffer(), fsync=self.fsync_each_write)
        return [WarcLocation(current.final_path.name, offset + s, n) for s, n in spans]

    def _serialize_exchange(self, exchange: HttpExchange) -> int:
        """Serializes the response and request records; the buffer position at
        the end of the response record."""
        url, body = exchange.url, exchange.body
        date = warc_date(exchange.fetched_at)
        common = [("WARC-Warcinfo-ID", self._warcinfo_id)]
        if exchange.ip_address:
            common.append(("WARC-IP-Address", exchange.ip_address))

        response_id = StatusAndHeadersParser.make_warc_id()
        head = _http_head(
            f"HTTP/1.1 {exchange.status} {exchange.reason}",
            stored_response_headers(exchange.response_headers, len(body)),
        )
        revisit = exchange.revisit
        if revisit is not None:
            self._serialize(
                "revisit", response_id, url, date, head if revisit.with_head else b"", b"",
                _RESPONSE_CONTENT_TYPE, [*common, *_revisit_headers(revisit)], revisit.digest,
            )  # fmt: skip
        else:
            truncated = [("WARC-Truncated", exchange.truncated)] if exchange.truncated else []
            self._serialize(
                "response", response_id, url, date, head, body, _RESPONSE_CONTENT_TYPE,
                [*common, *truncated], exchange.payload_digest,
            )  # fmt: skip
        response_end = self._buffer.tell()

        target, host = _request_target(url)
        request_headers = exchange.request_headers
        if not any(name.lower() == "host" for name, _ in request_headers):
            # Scrapy's download handler adds Host on the wire, not to request.headers.
            request_headers = [("Host", host), *request_headers]
        head = _http_head(f"{exchange.method} {target} HTTP/1.1", request_headers)
        self._serialize(
            "request",
            StatusAndHeadersParser.make_warc_id(),
            url,
            date,
            head,
            exchange.request_body,
            _REQUEST_CONTENT_TYPE,
            [*common, ("WARC-Concurrent-To", response_id)],
        )
        return response_end

    def _warcinfo_record(self, name: str) -> bytes:
        """A new file's first record (RollingFile.open_new's ``first``)."""
        self._take_buffer()
        info: dict[str, Any] = {
            "software": _software(),
            "format": "WARC File Format 1.1",
            "conformsTo": CONFORMS_TO,
            **self.warcinfo,
        }
        record = self._warc.create_warcinfo_record(name, info)
        self._warcinfo_id = record.rec_headers.get_header("WARC-Record-ID")
        self._warc.write_record(record)
        return self._take_buffer()

    def _serialize(
        self,
        record_type: str,
        record_id: str,
        url: str,
        date: str,
        head: bytes,
        payload: bytes,
        content_type: str,
        extra: list[tuple[str, str]],
        digest: str | None = None,
    ) -> None:
        rec_headers = StatusAndHeaders(
            "",
            [
                ("WARC-Type", record_type),
                ("WARC-Record-ID", record_id),
                ("WARC-Date", date),
                ("WARC-Target-URI", url),
                *extra,
                # Set here, so warcio does not digest the HTTP head with the payload:
                # it only parses the head itself, which would %-encode it (module doc).
                ("WARC-Payload-Digest", digest or payload_digest(payload)),
            ],
            protocol=WARC_VERSION,
        )
        block = head + payload
        # warcio writes only the parsed HTTP head of a record it knows as a
        # revisit (the block given here would be left out): it is handed over
        # as a response, its WARC-Type header saying what it is.
        kind = "response" if record_type == "revisit" else record_type
        record = ArcWarcRecord(
            "warc", kind, rec_headers, io.BytesIO(block), None, content_type, len(block)
        )
        self._warc.write_record(record)  # adds WARC-Block-Digest and Content-Length

    def _take_buffer(self) -> bytes:
        data = self._buffer.getvalue()
        self._buffer.seek(0)
        self._buffer.truncate()
        return data
