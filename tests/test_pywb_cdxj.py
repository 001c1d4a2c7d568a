"""The WARC files' CDXJ index (crawlproject/store/index.py) against webrecorder's
``cdxj-indexer`` (what pywb's ``wb-manager`` runs), on files the project's
writer wrote: URLs that SURT rewrites (case, ``www.``, query order, fragment,
percent-escapes, IPv4 and IPv6 hosts, ports), a POST, a redirect, responses
with and without a Content-Type. Its CLI runs as a subprocess, as an operator
would run it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from crawlproject.store.index import build_index, find, index_path, url_key
from tests.test_warc import Exchange, sample_exchanges, write_all

CDXJ_INDEXER = Path(sys.executable).parent / "cdxj-indexer"


def tricky_exchanges() -> list[Exchange]:
    return [
        *sample_exchanges(),
        Exchange(
            "https://WWW.Example.com/A/b?z=1&a=2#frag", b"q", [("Content-Type", "TEXT/HTML ;x")]
        ),
        Exchange("http://example.com/a/b?a=2&z=1", b"same key", [("Content-Type", "text/html")]),
        Exchange("http://ex.test/caf%C3%A9?q=%E2%82%AC", b"no content-type", []),
        Exchange(
            "http://ex.test/moved",
            b"gone",
            [("Location", "/caf\xe9"), ("Content-Type", "")],
            status=301,
            reason="Moved Permanently",
        ),
        Exchange("http://127.0.0.2:8080/p/1", b"ipv4", [("Content-Type", "text/plain")]),
        Exchange("http://[::1]:8080/v6", b"ipv6", [("Content-Type", "text/plain")]),
    ]


def cdxj_indexer(path: Path) -> list[str]:
    out = subprocess.run(
        [str(CDXJ_INDEXER), "--sort", str(path)], capture_output=True, text=True, check=True,
        timeout=60,
    ).stdout  # fmt: skip
    return out.splitlines()


def test_index_lines_are_cdxj_indexers_plus_the_redirect_field(tmp_path: Path) -> None:
    exchanges = tricky_exchanges()
    write_all(tmp_path, exchanges)
    [warc] = tmp_path.glob("*.warc.gz")
    ours = build_index(warc).read_text(encoding="utf-8").splitlines()
    theirs = cdxj_indexer(warc)
    assert len(ours) == len(exchanges) == len(theirs)
    redirects = {}
    for our_line, their_line in zip(ours, theirs, strict=True):
        key, timestamp, raw = our_line.split(" ", 2)
        fields = json.loads(raw)
        # The one addition: a 3xx's Location (Common Crawl's field), last.
        if "redirect" in fields:
            assert list(fields)[-1] == "redirect"
            redirects[fields["url"]] = fields.pop("redirect")
            our_line = f"{key} {timestamp} {json.dumps(fields)}"
        assert our_line == their_line  # the same bytes: key, order, fields, spacing
    assert redirects == {"http://ex.test/moved": "/caf\xe9"}
    # Sorted by the SURT key, which is not the URL.
    assert [line.split(" ", 1)[0] for line in ours][:2] == ["2,0,0,127:8080)/p/1", "::1:8080)/v6"]
    assert any(line.startswith("com,example)/a/b?a=2&z=1 ") for line in ours)


def test_find_by_surt_key_prefers_the_exact_url(tmp_path: Path) -> None:
    write_all(tmp_path, tricky_exchanges())
    [warc] = tmp_path.glob("*.warc.gz")
    lines = build_index(warc).read_text(encoding="utf-8").splitlines()
    assert url_key("https://WWW.Example.com/A/b?z=1&a=2#frag") == "com,example)/a/b?a=2&z=1"
    # Two URLs, one SURT key: each finds its own record.
    first = find(lines, "https://WWW.Example.com/A/b?z=1&a=2#frag")
    second = find(lines, "http://example.com/a/b?a=2&z=1")
    assert first is not None and first.mime == "TEXT/HTML" and first.status == 200
    assert second is not None and second.url == "http://example.com/a/b?a=2&z=1"
    assert first.offset != second.offset
    # A third URL of that key (as pywb would) gets one of them, its URL said.
    other = find(lines, "https://example.com/a/b?z=1&a=2")
    assert other is not None and other.url in (first.url, second.url)
    moved = find(lines, "http://ex.test/moved")
    assert moved is not None and (moved.status, moved.mime) == (301, "")
    bare = find(lines, "http://ex.test/caf%C3%A9?q=%E2%82%AC")
    assert bare is not None and bare.mime == "" and bare.filename == warc.name
    assert find(lines, "http://ex.test/nope") is None


def test_find_reads_indexes_keyed_by_the_raw_url(tmp_path: Path) -> None:
    """Index files of crawls from before SURT keys: ``<url> <ts> <JSON>``, ints."""
    old = {
        "url": "http://a.test/page", "mime": "text/html", "status": 200,
        "digest": "sha1:AAAA", "offset": 10, "length": 20, "filename": "x.warc.gz",
    }  # fmt: skip
    newer = {**old, "offset": 30}
    lines = [
        f"http://a.test/page 20240101000000 {json.dumps(old)}",
        f"http://a.test/page 20240202000000 {json.dumps(newer)}",
        f"http://a.test/page2 20240303000000 {json.dumps({**old, 'url': 'http://a.test/page2'})}",
    ]
    entry = find(lines, "http://a.test/page")
    assert entry is not None and (entry.offset, entry.timestamp) == (30, "20240202000000")
    assert index_path(Path("d/x.warc.gz")) == Path("d/x.warc.gz.cdxj")
