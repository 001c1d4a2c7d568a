"""A CDXJ index beside each WARC file, as pywb and ``cdxj-indexer`` write it.

For ``x.warc.gz`` the uploader stores ``x.warc.gz.cdxj`` next to it: one line
per record ``cdxj-indexer`` (webrecorder's, which pywb's ``wb-manager`` runs)
indexes, ``<SURT key> <14-digit timestamp> <JSON>``, sorted as Python sorts
the lines (code point order, which is UTF-8 byte order), the same bytes that
``cdxj-indexer --sort`` writes for the same file: the key is ``surt.surt(url)``
(the ``surt`` package both use: host reversed, ``www.`` dropped, lower case,
query arguments sorted, fragment dropped), and the JSON holds, in this order
and as strings, ``url``, ``mime`` (left out when the record has no
Content-Type), ``status``, ``digest``, ``length``, ``offset``, ``filename``.
Indexed records: ``response`` and ``revisit`` (``mime`` ``warc/revisit``),
and ``resource`` and ``metadata`` records other than ``application/warc-
fields`` ones, as ``cdxj-indexer`` picks them (this project writes responses
and revisits; a revisit without an HTTP head, a 304's, has no ``status``).
One addition: a redirect's record (a 3xx with a ``Location``,
crawlproject/store/hops.py) ends with ``"redirect": <Location>``, as Common
Crawl's CDXJ has it; pywb ignores the field. So pywb serves these files as
they are: a collection whose ``index_paths`` is the directory of the
``.cdxj`` files and ``archive_paths`` that of the WARC files replays every page
(tests/test_pywb.py), with no re-indexing.

Why files and not Redis: an index entry per page kept in Redis would cost the
fleet ~100 bytes per page for ever (1.5 TB at 15 billion pages); index files
cost nothing until read, travel with their WARC file, and are built from the
finished file, so a file recovered from a killed worker gets an exact one.
``crawlproject body URL`` scans them (newest first); a crawl of billions of
pages would merge them into a sorted, sharded index (ZipNum) instead.

The object format (crawlproject/store/objects.py) writes lines keyed the same
way (SURT) to its own index files, appended in crawl order (pywb cannot replay
it anyway: there are no WARC records), with ``object`` (the body's store key)
in place of ``filename`` and ``offset``, and ``length`` counting body bytes:
:func:`find` reads both (:attr:`IndexEntry.object_key`). Index files written
before the SURT keys (keyed by the URL as fetched) are still read:
:func:`find` matches a line keyed by the URL itself too.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import surt
from warcio.archiveiterator import ArchiveIterator
from warcio.recordloader import ArcWarcRecord
from warcio.timeutils import iso_date_to_timestamp

from crawlproject.body_digest import payload_digest_of

INDEX_SUFFIX = ".cdxj"
# The record types cdxj-indexer indexes by default (its DEFAULT_RECORDS).
INDEXED_TYPES = frozenset({"response", "revisit", "resource", "metadata"})
# A Content-Type's first word is the CDX mime (cdxj-indexer's RE_SPACE).
_MIME_END = re.compile(r"[;\s]")


@dataclass(frozen=True)
class IndexEntry:
    url: str
    timestamp: str
    filename: str
    offset: int
    length: int
    status: int
    mime: str
    digest: str
    # Set for an entry of the object format; filename and offset are then unused.
    object_key: str | None = None


def url_key(url: str) -> str:
    """The SURT key of ``url`` (``com,example)/a?b=1``), as cdxj-indexer and
    pywb compute it; a URL ``surt`` cannot parse is its own key (as there)."""
    try:
        return str(surt.surt(url))
    except Exception:  # cdxj-indexer's own fallback, whatever the error
        return url


def index_path(warc_path: Path) -> Path:
    return warc_path.with_name(warc_path.name + INDEX_SUFFIX)


def build_index(warc_path: Path) -> Path:
    """Writes the index of a finished WARC file beside it; returns its path."""
    data = index_bytes(warc_path)
    out = index_path(warc_path)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_bytes(data)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk must not keep a partial one
        raise
    tmp.replace(out)
    return out


def index_bytes(warc_path: Path) -> bytes:
    """The index of a finished WARC file, in memory (what build_index writes)."""
    lines = sorted(_lines(warc_path))
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _indexed(record: ArcWarcRecord) -> bool:
    if record.rec_type not in INDEXED_TYPES:
        return False
    if record.rec_type in ("resource", "metadata"):
        return record.rec_headers.get_header("Content-Type") != "application/warc-fields"
    return True


def _mime(record: ArcWarcRecord) -> str | None:
    if record.rec_type == "revisit":
        return "warc/revisit"
    if record.rec_type == "response":
        http = record.http_headers
        value = http.get_header("Content-Type") if http else None
    else:
        value = record.rec_headers.get_header("Content-Type")
    return _MIME_END.split(value, 1)[0].strip() if value else value


def _payload_digest(record: ArcWarcRecord) -> str:
    """The header's, or computed from the payload as cdxj-indexer does when absent."""
    digest = record.rec_headers.get_header("WARC-Payload-Digest")
    if digest:
        return str(digest)
    sha1 = hashlib.sha1()
    while chunk := record.raw_stream.read(1 << 16):
        sha1.update(chunk)
    return payload_digest_of(sha1.digest())


def _lines(warc_path: Path) -> Iterator[str]:
    with open(warc_path, "rb") as stream:
        records = ArchiveIterator(stream, arc2warc=True)
        for record in records:
            if not _indexed(record):
                continue
            offset = records.get_record_offset()
            headers = record.rec_headers
            http = record.http_headers
            url = headers.get_header("WARC-Target-URI") or ""
            fields: dict[str, Any] = {"url": url}
            mime = _mime(record)
            if mime is not None:
                fields["mime"] = mime
            status = None
            if http and record.rec_type in ("response", "revisit"):
                status = http.get_statuscode()
            if status is not None:
                fields["status"] = status
            fields["digest"] = _payload_digest(record)
            records.read_to_end(record)
            fields["length"] = str(records.get_record_length())
            fields["offset"] = str(offset)
            fields["filename"] = warc_path.name
            location = http.get_header("Location") if http else None
            if location and status and status.startswith("3"):
                # As Common Crawl's CDXJ has it: where a redirect record leads.
                fields["redirect"] = location
            timestamp = iso_date_to_timestamp(headers.get_header("WARC-Date"))
            # json.dumps as cdxj-indexer calls it (ASCII, ", " and ": ").
            yield f"{url_key(url)} {timestamp} {json.dumps(fields)}"


def find(lines: Iterable[str], url: str) -> IndexEntry | None:
    """The entry for ``url`` among CDXJ lines, or None: the latest of those
    whose ``url`` is ``url`` itself, else (another URL of the same SURT key:
    ``www.``, case, query order) the latest of its key. Lines keyed by the
    URL as fetched (index files written before SURT keys) match too."""
    key_prefix = url_key(url) + " "
    legacy_prefix = url + " "
    best: tuple[bool, str, IndexEntry] | None = None
    for line in lines:
        if not (line.startswith(key_prefix) or line.startswith(legacy_prefix)):
            continue
        _, timestamp, raw = line.rstrip("\n").split(" ", 2)
        fields = json.loads(raw)
        entry = IndexEntry(
            url=fields["url"],
            timestamp=timestamp,
            filename=fields.get("filename", ""),
            offset=int(fields.get("offset", 0)),
            length=int(fields["length"]),
            status=int(fields.get("status") or 0),
            mime=fields.get("mime", ""),
            digest=fields.get("digest", ""),
            object_key=fields.get("object"),
        )
        rank = (entry.url == url, timestamp, entry)
        if best is None or rank[:2] > best[:2]:
            best = rank
    return best[2] if best else None
