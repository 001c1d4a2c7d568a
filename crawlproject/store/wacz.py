"""``crawlproject wacz --crawl NAME --output FILE.wacz``: a crawl's WARC files
as one WACZ package (WACZ 1.1.1, https://specs.webrecorder.net/wacz/1.1.1/),
what ReplayWeb.page, Browsertrix and pywb open.

The package (a ZIP) holds:

* ``archive/<file>.warc.gz``: every WARC file of the crawl in the body store
  (``CRAWL_STORE_URI``: a directory or S3; ``<crawl>/warc/``), stored as they
  are (ZIP "stored", not deflated: a reader seeks into them);
* ``indexes/index.cdx``: the CDXJ lines of the files' own indexes (the
  ``.cdxj`` beside each, crawlproject/store/index.py; built from the file if
  missing), merged and sorted;
* ``pages/pages.jsonl``: the header line, then one line per page: each URL
  the crawl stored with a 2xx answer or a revisit (its latest capture), its
  time, and the ``<title>`` of the stored HTML body where it has one (a
  revisit: its original's). The pages are the crawl's own records, never
  guessed from the content;
* ``datapackage.json``: every file's path, size and sha256, the WACZ version,
  the crawl's name as title; ``datapackage-digest.json``: its sha256.

A file in S3 is read whole into memory, one at a time (a WARC file is at most
``CRAWL_STORE_ROTATE_BYTES``). The package is written to ``FILE.wacz.part``
and renamed when complete.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from crawlproject.store.base import BodyStore
from crawlproject.store.config import StoreConfig
from crawlproject.store.errors import StoreError, StoreUnavailable
from crawlproject.store.factory import open_store
from crawlproject.store.index import INDEX_SUFFIX, index_bytes
from crawlproject.store.local import LocalStore
from crawlproject.store.warc import WARC_SUFFIX

WACZ_VERSION = "1.1.1"
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title\s*>", re.I | re.S)
_TITLE_SCAN_BYTES = 64 * 1024  # a page's <title> is in its head
HASH_CHUNK = 1 << 20


class WaczError(Exception):
    """The package cannot be made (one line for the user)."""


@dataclass(frozen=True, slots=True)
class WaczSummary:
    path: Path
    warc_files: int
    pages: int
    bytes: int


@dataclass(slots=True)
class _Capture:
    url: str
    timestamp: str  # 14 digits
    title: str | None
    original: str | None = None  # a revisit: its original's payload digest (its title)


def write_wacz(store: BodyStore, crawl: str, output: Path) -> WaczSummary:
    prefix = f"{crawl}/warc/"
    keys = set(store.keys(prefix))
    warcs = sorted(k for k in keys if k.endswith(WARC_SUFFIX))
    if not warcs:
        raise WaczError(f"crawl {crawl!r} has no WARC files in {store.uri}{prefix}")
    part = output.with_name(output.name + ".part")
    if output.is_dir():
        raise WaczError(f"cannot write {output}: it is a directory")
    try:  # before any file is read: an output that cannot be written says so
        part_file = open(part, "wb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise WaczError(f"cannot write {output}: {exc.strerror or exc}") from exc
    resources: list[dict[str, object]] = []
    lines: list[str] = []
    pages: dict[str, _Capture] = {}
    titles: dict[str, str] = {}  # payload digest -> title, for revisits
    try:
        with (
            part_file,
            zipfile.ZipFile(part_file, "w", allowZip64=True) as zf,
            tempfile.TemporaryDirectory() as tmp,
        ):
            for key in warcs:
                name = key.rsplit("/", 1)[1]
                path = _local_copy(store, key, Path(tmp))
                index_key = key + INDEX_SUFFIX
                index = store.get(index_key) if index_key in keys else index_bytes(path)
                file_lines = index.decode("utf-8").splitlines()
                lines.extend(file_lines)
                _read_pages(path, file_lines, pages, titles)
                resources.append(_add_file(zf, path, f"archive/{name}"))
                if path.parent == Path(tmp):
                    path.unlink()
            lines.sort()  # as cdxj-indexer --sort sorts (code points)
            index_data = "".join(line + "\n" for line in lines).encode("utf-8")
            resources.append(_add_bytes(zf, "indexes/index.cdx", index_data))
            page_lines = [json.dumps(PAGES_HEADER), *_page_lines(pages.values(), titles)]
            pages_data = "".join(line + "\n" for line in page_lines).encode("utf-8")
            resources.append(_add_bytes(zf, "pages/pages.jsonl", pages_data))
            package = json.dumps(_datapackage(crawl, resources), indent=2).encode("utf-8")
            zf.writestr(_info("datapackage.json", zipfile.ZIP_DEFLATED), package)
            digest = {"path": "datapackage.json", "hash": _sha256(package)}
            zf.writestr(
                _info("datapackage-digest.json", zipfile.ZIP_DEFLATED),
                json.dumps(digest, indent=2).encode("utf-8"),
            )
        os.replace(part, output)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return WaczSummary(output, len(warcs), len(pages), output.stat().st_size)


def _local_copy(store: BodyStore, key: str, tmp: Path) -> Path:
    if isinstance(store, LocalStore):
        return store.path(key)
    path = tmp / key.rsplit("/", 1)[1]
    path.write_bytes(store.get(key))
    return path


def _info(name: str, compress: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, datetime.now(UTC).timetuple()[:6])
    info.compress_type = compress
    return info


def _add_file(zf: zipfile.ZipFile, path: Path, name: str) -> dict[str, object]:
    sha = hashlib.sha256()
    with (
        open(path, "rb") as src,
        zf.open(_info(name, zipfile.ZIP_STORED), "w", force_zip64=True) as out,
    ):
        while chunk := src.read(HASH_CHUNK):
            sha.update(chunk)
            out.write(chunk)
    return _resource(name, "sha256:" + sha.hexdigest(), path.stat().st_size)


def _add_bytes(zf: zipfile.ZipFile, name: str, data: bytes) -> dict[str, object]:
    zf.writestr(_info(name, zipfile.ZIP_DEFLATED), data)
    return _resource(name, _sha256(data), len(data))


def _resource(path: str, digest: str, size: int) -> dict[str, object]:
    # Frictionless names: lower case, digits, "-", "_", "."; py-wacz's rule.
    return {"name": os.path.basename(path).lower(), "path": path, "hash": digest, "bytes": size}


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _datapackage(crawl: str, resources: list[dict[str, object]]) -> dict[str, object]:
    try:
        version = metadata.version("crawlproject")
    except metadata.PackageNotFoundError:
        version = "dev"
    return {
        "profile": "data-package",
        "resources": resources,
        "title": crawl,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wacz_version": WACZ_VERSION,
        "software": f"crawlproject/{version}",
    }


def _read_pages(
    path: Path, lines: Iterable[str], pages: dict[str, _Capture], titles: dict[str, str]
) -> None:
    """The file's pages from its index lines: 2xx answers and revisits (a
    3xx, a 4xx, a 5xx is no page); the titles of its HTML bodies."""
    with open(path, "rb") as stream:
        for line in lines:
            _, timestamp, raw = line.split(" ", 2)
            fields = json.loads(raw)
            status, mime = str(fields.get("status", "")), fields.get("mime", "")
            revisit = mime == "warc/revisit"
            # A 304's revisit has no status of its own (no HTTP head): a page.
            if not (status.startswith("2") or (revisit and not status)):
                continue
            title = None
            if mime in ("text/html", "application/xhtml+xml"):
                stream.seek(int(fields["offset"]))
                title = _title(stream.read(int(fields["length"])))
                if title is not None:
                    titles.setdefault(fields["digest"], title)
            url = fields["url"]
            seen = pages.get(url)
            if seen is None or timestamp >= seen.timestamp:
                pages[url] = _Capture(url, timestamp, title, fields["digest"] if revisit else None)


def _title(member: bytes) -> str | None:
    """The <title> of a response record's body (its gzip member), if any."""
    try:
        record = gzip.decompress(member)
    except (OSError, EOFError):
        return None
    # WARC head, then HTTP head, then the body: the title is in the body.
    body = record.split(b"\r\n\r\n", 2)[-1][:_TITLE_SCAN_BYTES]
    found = _TITLE.search(body)
    if found is None:
        return None
    text = html.unescape(found.group(1).decode("utf-8", "replace"))
    return " ".join(text.split()) or None


def _page_lines(captures: Iterable[_Capture], titles: dict[str, str]) -> Iterator[str]:
    for capture in sorted(captures, key=lambda c: (c.timestamp, c.url)):
        t = capture.timestamp
        ts = f"{t[0:4]}-{t[4:6]}-{t[6:8]}T{t[8:10]}:{t[10:12]}:{t[12:14]}Z"
        page: dict[str, str] = {
            "id": hashlib.sha1(f"{capture.url} {t}".encode()).hexdigest()[:16],
            "url": capture.url,
            "ts": ts,
        }
        title = capture.title
        if capture.original is not None:
            title = titles.get(capture.original)
        if title:
            page["title"] = title
        yield json.dumps(page)


def wacz_command(config: StoreConfig, crawl: str, output: str) -> int:
    """The command: one line on stdout (what was packaged), or one on stderr
    (why not) and exit status 1."""
    target = Path(output)
    if target.suffix != ".wacz":
        print(
            f"crawlproject wacz: --output {output!r}: name the package FILE.wacz", file=sys.stderr
        )
        return 1
    try:
        summary = write_wacz(open_store(config), crawl, target)
    except (WaczError, OSError, StoreError, StoreUnavailable) as exc:
        print(f"crawlproject wacz: {exc}", file=sys.stderr)
        return 1
    print(
        f"{summary.path}: {summary.warc_files} WARC file(s), {summary.pages} pages, "
        f"{summary.bytes} bytes (crawl {crawl!r})"
    )
    return 0
