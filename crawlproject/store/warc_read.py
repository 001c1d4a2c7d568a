"""Reading one response record back from a WARC file or a store (``crawlproject
body``, the tests): the gzip member a :class:`~crawlproject.store.warc.
WarcLocation` or a CDX line names, its body checked against its payload digest.
Headers come back as stored (warc.py's module doc: the renamed ones)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeadersParserException

from crawlproject.body_digest import payload_digest


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """One response record read back (see :func:`read_payload`)."""

    url: str
    warc_date: str
    record_id: str
    status: int
    reason: str
    headers: list[tuple[str, str]]  # as stored: see the module doc for the renamed ones
    body: bytes


class WarcReadError(ValueError):
    """The byte range does not hold an intact response record."""


def read_payload(path: Path, offset: int, length: int) -> StoredResponse:
    """Read the response record at ``offset`` (the gzip member of ``length`` bytes
    a :class:`WarcLocation` names) and check its body against its payload digest."""
    with open(path, "rb") as stream:
        stream.seek(offset)
        member = stream.read(length)
    if len(member) != length:
        raise WarcReadError(f"{path}: {length} bytes at {offset} run past the end")
    return parse_response_member(member, f"{path}", offset)


def parse_response_member(member: bytes, path: str, offset: int) -> StoredResponse:
    """The response record in one gzip member (bytes read from a file or a store;
    ``path`` and ``offset`` only name it in errors), its body checked."""
    records = ArchiveIterator(io.BytesIO(member), no_record_parse=True)
    try:
        record = next(iter(records))
        block = record.raw_stream.read()
    except (
        StopIteration,
        EOFError,
        OSError,  # zlib.error is not one; warcio turns a bad member into the others
        ValueError,
        ArchiveLoadFailed,
        StatusAndHeadersParserException,
    ) as exc:
        raise WarcReadError(f"{path}: no record at {offset}: {exc}") from exc
    finally:
        records.close()
    if record.rec_type != "response":
        raise WarcReadError(f"{path}: record at {offset} is a {record.rec_type!r}")
    head, separator, body = block.partition(b"\r\n\r\n")
    if not separator:
        raise WarcReadError(f"{path}: record at {offset} has no HTTP header end")
    expected = record.rec_headers.get_header("WARC-Payload-Digest")
    if expected and payload_digest(body) != expected:
        raise WarcReadError(f"{path}: record at {offset} fails its payload digest")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    _version, _, status_and_reason = status_line.partition(" ")
    status, _, reason = status_and_reason.partition(" ")
    headers = []
    for line in header_lines:
        name, _, value = line.partition(":")
        headers.append((name, value.lstrip(" \t")))
    return StoredResponse(
        url=record.rec_headers.get_header("WARC-Target-URI"),
        warc_date=record.rec_headers.get_header("WARC-Date"),
        record_id=record.rec_headers.get_header("WARC-Record-ID"),
        status=int(status),
        reason=reason,
        headers=headers,
        body=body,
    )
