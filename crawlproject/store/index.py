"""A CDXJ-style index beside each WARC file: where each stored page is.

For ``x.warc.gz`` the uploader stores ``x.warc.gz.cdxj`` next to it: one line
per response record, ``<url> <14-digit timestamp> <JSON>``, sorted, the JSON
holding ``url``, ``mime``, ``status``, ``digest``, ``offset``, ``length`` and
``filename`` (as pywb's CDXJ does; the key is the page URL as fetched, not a
SURT), and for a redirect's record (a 3xx, crawlproject/store/hops.py) its
``Location`` as ``redirect``, as Common Crawl's index has it. Why files and
not Redis: an index entry per page kept in Redis would cost the fleet ~100
bytes per page for ever (1.5 TB at 15 billion pages); index files cost
nothing until read, travel with their WARC file, and are built from the
finished file, so a file recovered from a killed worker gets an exact one.
``crawlproject body URL`` scans them (newest first); a crawl of billions of
pages would merge them into a sorted, sharded index (ZipNum) instead.

The object format (crawlproject/store/objects.py) writes lines of the same
form to its own index files, with ``object`` (the body's store key) in place
of ``filename`` and ``offset``, and ``length`` counting body bytes:
:func:`find` reads both (:attr:`IndexEntry.object_key`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

INDEX_SUFFIX = ".cdxj"


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


def _lines(warc_path: Path) -> Iterator[str]:
    with open(warc_path, "rb") as stream:
        records = ArchiveIterator(stream)
        for record in records:
            if record.rec_type != "response":
                continue
            offset = records.get_record_offset()
            headers = record.rec_headers
            http = record.http_headers
            url = headers.get_header("WARC-Target-URI") or ""
            date = headers.get_header("WARC-Date") or ""
            records.read_to_end(record)
            status = int(http.get_statuscode() or 0) if http else 0
            fields = {
                "url": url,
                "mime": (http.get_header("Content-Type") or "").split(";")[0].strip()
                if http
                else "",
                "status": status,
                "digest": headers.get_header("WARC-Payload-Digest") or "",
                "offset": offset,
                "length": records.get_record_length(),
                "filename": warc_path.name,
            }
            location = http.get_header("Location") if http else None
            if location and 300 <= status < 400:
                # As Common Crawl's CDXJ has it: where a redirect record leads.
                fields["redirect"] = location
            yield f"{url} {_timestamp14(date)} {json.dumps(fields, ensure_ascii=False)}"


def _timestamp14(warc_date: str) -> str:
    digits = "".join(ch for ch in warc_date if ch.isdigit())
    return digits[:14].ljust(14, "0")


def find(lines: Iterable[str], url: str) -> IndexEntry | None:
    """The latest entry for ``url`` among CDXJ lines, or None."""
    best: IndexEntry | None = None
    prefix = url + " "
    for line in lines:
        if not line.startswith(prefix):
            continue
        _, timestamp, raw = line.rstrip("\n").split(" ", 2)
        fields = json.loads(raw)
        entry = IndexEntry(
            url=fields["url"],
            timestamp=timestamp,
            filename=fields.get("filename", ""),
            offset=int(fields.get("offset", 0)),
            length=int(fields["length"]),
            status=int(fields["status"]),
            mime=fields["mime"],
            digest=fields["digest"],
            object_key=fields.get("object"),
        )
        if best is None or entry.timestamp > best.timestamp:
            best = entry
    return best
