"""``crawlproject body URL [--headers]``: a stored page's body, or its status
and headers, found through the body store's indexes (WARC or objects)."""

from __future__ import annotations

import gzip
import http
import json
import sys

from crawlproject.body_digest import payload_digest
from crawlproject.store.config import StoreConfig
from crawlproject.store.factory import open_store
from crawlproject.store.index import INDEX_SUFFIX, IndexEntry, find
from crawlproject.store.objects import INDEX_KEY_DIR
from crawlproject.store.warc_read import parse_response_member

REVISIT_MIME = "warc/revisit"  # a revisit record's CDX mime


def print_body(config: StoreConfig, crawl: str, url: str, headers: bool) -> int:
    """Finds ``url`` in the crawl's WARC indexes (crawlproject/store/index.py:
    by its SURT key, or its URL in indexes written before SURT keys) and the
    object format's (crawlproject/store/objects.py), and prints its latest
    capture's body (or status and headers: for the object format only the
    status and Content-Type, the other headers are not kept). A URL that
    redirected has a record of its own (its 3xx): its body is printed, and
    where it leads on stderr. A URL
    whose latest record is a revisit (a recrawl's 304, the same bytes again:
    crawlproject/store/revisits.py) prints its stored original, and on stderr
    since when it is unchanged."""
    store = open_store(config)
    prefix = f"{crawl}/warc/"
    keys = [
        *sorted(store.keys(prefix), reverse=True),
        *sorted(store.keys(f"{crawl}/{INDEX_KEY_DIR}/"), reverse=True),
    ]
    lines: dict[str, list[str]] = {}  # index key -> its lines, read once

    def index_lines(key: str) -> list[str]:
        if key not in lines:
            lines[key] = store.get(key).decode("utf-8").splitlines()
        return lines[key]

    keys = [key for key in keys if key.endswith(INDEX_SUFFIX)]
    found = [e for key in keys if (e := find(index_lines(key), url)) is not None]
    # The latest capture of all files (the URL's own, else its SURT key's, as
    # find() ranks them): file names sort by worker, not by time.
    for entry in sorted(found, key=lambda e: (e.url == url, e.timestamp))[-1:]:
        if entry.url != url:
            # Found by its SURT key (as pywb looks it up): say which URL it is.
            print(f"{url}: stored as {entry.url} (same SURT key)", file=sys.stderr)
        if entry.mime == REVISIT_MIME:
            # Its body is the stored original's (a recrawl's 304, or the same bytes).
            original = next(
                (o for k in keys if (o := _original(index_lines(k), entry.digest))), None
            )
            if original is None:
                print(f"{url}: its revisit's original ({entry.digest}) is not stored in crawl "
                      f"{crawl!r} ({store.uri})", file=sys.stderr)  # fmt: skip
                return 1
            print(f"{url}: unchanged since {original.timestamp} (the body stored for "
                  f"{original.url} then)", file=sys.stderr)  # fmt: skip
            entry = original
        if entry.object_key is not None:
            return _print_object(store.get(entry.object_key), entry, headers)
        member = store.get_range(prefix + entry.filename, entry.offset, entry.length)
        page = parse_response_member(member, prefix + entry.filename, entry.offset)
        if headers:
            print(f"{page.status} {page.reason}".rstrip())
            for name, value in page.headers:
                print(f"{name}: {value}")
        else:
            sys.stdout.buffer.write(page.body)
            sys.stdout.buffer.flush()
            location = next((v for n, v in page.headers if n.lower() == "location"), None)
            if 300 <= page.status < 400 and location:
                # A redirect's record: its body (often empty) alone would puzzle.
                print(f"{url}: {page.status} redirect to {location}", file=sys.stderr)
        return 0
    print(f"{url}: not stored in crawl {crawl!r} ({store.uri})", file=sys.stderr)
    return 1


def _original(lines: list[str], digest: str) -> IndexEntry | None:
    """The entry of a record that stored the payload ``digest`` whole, if any."""
    for line in lines:
        _, timestamp, raw = line.split(" ", 2)
        fields = json.loads(raw)
        # A WARC record (the object format's lines have no filename).
        whole = fields.get("mime") != REVISIT_MIME and "filename" in fields
        if whole and fields.get("digest") == digest:
            return IndexEntry(
                url=fields["url"], timestamp=timestamp, filename=fields["filename"],
                offset=int(fields["offset"]), length=int(fields["length"]),
                status=int(fields.get("status") or 0), mime=fields.get("mime", ""),
                digest=digest,
            )  # fmt: skip
    return None


def _print_object(data: bytes, entry: IndexEntry, headers: bool) -> int:
    """Prints an object-format page: its body, or its status line and Content-Type."""
    body = gzip.decompress(data)
    if payload_digest(body) != entry.digest:
        print(f"{entry.object_key}: fails its digest {entry.digest}", file=sys.stderr)
        return 1
    if headers:
        try:
            reason = http.HTTPStatus(entry.status).phrase
        except ValueError:
            reason = ""
        print(f"{entry.status} {reason}".rstrip())
        if entry.mime:
            print(f"Content-Type: {entry.mime}")
    else:
        sys.stdout.buffer.write(body)
        sys.stdout.buffer.flush()
    return 0
