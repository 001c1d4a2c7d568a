"""Redirect hops (crawlproject/store/hops.py, middlewares/redirect_hops.py): their
bounds, the signal that archives each followed 3xx, and their WARC records."""

from __future__ import annotations

import gzip
import json
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler
from warcio.archiveiterator import ArchiveIterator

from crawlproject import default_settings
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.store.hops import (
    BODY_MAX_BYTES,
    HEADER_MAX_LINES,
    HEADERS_MAX_CHARS,
    REQUEST_HEADERS_MAX_CHARS,
    TRUNCATED_LENGTH,
    TRUNCATED_UNSPECIFIED,
    Hop,
    build_hop,
    hop_body,
    redirect_summary,
)
from crawlproject.store.index import find, index_bytes
from crawlproject.store.signals import redirect_received
from crawlproject.store.warc import HttpExchange, RollingWarcWriter
from crawlproject.store.warc_read import read_payload
from middlewares.redirect_hops import RedirectHopsMiddleware

CODEC = RequestCodec(default_settings.CRAWL_REQUEST_CLASSES)
WHEN = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
MOVED = b"<html><body>Moved <a href='https://a.test/x/'>here</a></body></html>"


def hop(**kw: object) -> Hop:
    args: dict[str, object] = {
        "url": "http://a.test/x",
        "status": 301,
        "headers": [("Location", "https://a.test/x/"), ("Content-Type", "text/html")],
        "body": MOVED,
        "fetched_at": WHEN,
        **kw,
    }
    return build_hop(**args)  # type: ignore[arg-type]


def test_a_hop_keeps_the_answer() -> None:
    record = hop(ip="127.0.0.3", request_headers=[("User-Agent", "ua")])
    assert record.url == "http://a.test/x" and record.status == 301
    assert record.location == "https://a.test/x/"
    assert record.body == MOVED and record.truncated is None
    assert record.ip == "127.0.0.3" and record.request_headers == [("User-Agent", "ua")]
    assert record.fetched_at == WHEN
    raw = bytes(range(256))
    assert hop(body=raw).body == raw
    assert hop(ip="").ip is None


def test_gzip_and_deflate_bodies_are_decoded_others_left_out() -> None:
    assert hop_body(gzip.compress(MOVED), "gzip") == (MOVED, None)
    assert hop_body(zlib.compress(MOVED), "deflate") == (MOVED, None)
    raw_deflate = zlib.compressobj(wbits=-15)
    assert hop_body(raw_deflate.compress(MOVED) + raw_deflate.flush(), "deflate") == (MOVED, None)
    assert hop_body(MOVED, "identity") == (MOVED, None)
    assert hop_body(b"", "gzip") == (b"", None)
    assert hop_body(b"\x1b\x00brotli", "br") == (None, TRUNCATED_UNSPECIFIED)
    assert hop_body(gzip.compress(gzip.compress(MOVED)), "gzip, gzip") == (
        None,
        TRUNCATED_UNSPECIFIED,
    )
    assert hop_body(b"not gzip at all", "gzip") == (None, TRUNCATED_UNSPECIFIED)
    assert hop_body(gzip.compress(MOVED)[:-6], "gzip") == (None, TRUNCATED_UNSPECIFIED)
    # A small gzip member that inflates past the limit (a tiny bomb) is left out.
    assert hop_body(gzip.compress(b"x" * (BODY_MAX_BYTES + 1)), "gzip") == (None, TRUNCATED_LENGTH)
    assert hop_body(b"x" * (BODY_MAX_BYTES + 1), "") == (None, TRUNCATED_LENGTH)
    assert hop_body(b"x" * BODY_MAX_BYTES, "")[0] == b"x" * BODY_MAX_BYTES
    # The header stays as sent: the WARC writer renames it X-Crawler-Content-Encoding.
    record = hop(
        headers=[("Location", "/y"), ("Content-Encoding", "gzip")], body=gzip.compress(MOVED)
    )
    assert record.body == MOVED and ("Content-Encoding", "gzip") in record.headers
    left_out = hop(body=b"x" * 10_000)
    assert left_out.body == b"" and left_out.truncated == TRUNCATED_LENGTH


def test_a_hostile_redirect_is_bounded_and_still_encodes() -> None:
    location = "https://a.test/" + "l" * 3000
    headers = [(f"X-Junk-{i}", "v" * 500) for i in range(200)] + [("Location", location)]
    record = hop(
        headers=headers,
        body=b"b" * 1_000_000,
        request_headers=[("Cookie", "c" * 50_000), ("User-Agent", "ua")],
    )
    stored = record.headers
    assert len(stored) <= HEADER_MAX_LINES
    assert sum(len(n) + len(v) for n, v in stored) <= HEADERS_MAX_CHARS
    assert ("Location", location) in stored  # kept first, though it came last
    assert record.location == location
    assert record.request_headers == [("User-Agent", "ua")]
    assert sum(len(n) + len(v) for n, v in record.request_headers) <= REQUEST_HEADERS_MAX_CHARS
    assert record.body == b"" and record.truncated == TRUNCATED_LENGTH


def test_redirect_summary() -> None:
    summary = redirect_summary(
        ["http://a/x", "https://a/x", "https://a/m"], [301, 302, "meta refresh"], "https://a/p"
    )
    assert summary == [
        {"url": "http://a/x", "status": 301, "location": "https://a/x"},
        {"url": "https://a/x", "status": 302, "location": "https://a/m"},
        {"url": "https://a/m", "status": None, "location": "https://a/p"},
    ]


async def test_middleware_signals_each_followed_redirect_and_adds_nothing_to_meta() -> None:
    crawler = get_crawler(settings_dict={"CRAWL_STORE_ENABLED": True})
    received: list[Hop] = []

    def on_redirect(hop: Hop) -> None:
        received.append(hop)

    crawler.signals.connect(on_redirect, signal=redirect_received)
    hops_mw = RedirectHopsMiddleware.from_crawler(crawler)
    redirect_mw = RedirectMiddleware.from_crawler(crawler)
    request = Request("http://a.test/x", headers={"User-Agent": "ua"}, meta={"depth": 0})
    response = HtmlResponse(
        "http://a.test/x",
        status=301,
        headers={"Location": "https://a.test/x/", "Content-Encoding": "gzip"},
        body=gzip.compress(MOVED),
        request=request,
    )
    # Responses pass from high to low order: 605, then RedirectMiddleware (600).
    passed = await hops_mw.process_response(request, response)
    assert passed is response  # unchanged: RedirectMiddleware follows it
    [first] = received
    assert (first.url, first.status, first.location, first.body) == (
        "http://a.test/x",
        301,
        "https://a.test/x/",
        MOVED,
    )
    assert ("User-Agent", "ua") in first.request_headers
    out = redirect_mw.process_response(request, passed)
    assert isinstance(out, Request) and out.url == "https://a.test/x/"
    # Nothing of the 3xx goes to the frontier's Redis with the next request.
    assert b"Moved" not in CODEC.encode(out, None)
    assert len(CODEC.encode(out, None)) < len(CODEC.encode(request, None)) + 300
    # The second hop of the chain: one more signal.
    second = Response("https://a.test/x/", status=302, headers={"Location": "/p"}, request=out)
    await hops_mw.process_response(out, second)
    assert [(h.url, h.status, h.location) for h in received] == [
        ("http://a.test/x", 301, "https://a.test/x/"),
        ("https://a.test/x/", 302, "/p"),
    ]
    # What RedirectMiddleware does not follow is not archived.
    for status, headers, meta in [
        (200, {}, {}),
        (301, {}, {}),  # no Location
        (304, {"Location": "/y"}, {}),
        (301, {"Location": "/y"}, {"dont_redirect": True}),
        (302, {"Location": "/y"}, {"handle_httpstatus_list": [302]}),
        (301, {"Location": "mailto:a@b.test"}, {}),
    ]:
        plain = Request("http://a.test/z", meta=meta)
        await hops_mw.process_response(plain, Response(plain.url, status=status, headers=headers))
        assert len(received) == 2, (status, headers, meta)


def test_middleware_is_off_without_warc_storage() -> None:
    from scrapy.exceptions import NotConfigured

    for settings in (
        {"CRAWL_STORE_ENABLED": False},
        {"CRAWL_STORE_ENABLED": True, "CRAWL_STORE_FORMAT": "object"},
    ):
        with pytest.raises(NotConfigured):
            RedirectHopsMiddleware.from_crawler(get_crawler(settings_dict=settings))


def test_hop_records_are_written_and_indexed(tmp_path: Path) -> None:
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    first = hop(
        headers=[("Location", "https://a.test/x/"), ("Content-Encoding", "gzip")],
        body=gzip.compress(MOVED),
    )
    second = hop(url="https://a.test/x/", status=302, headers=[("Location", "/p")],
                 body=b"z" * 10_000)  # fmt: skip
    exchanges = [
        HttpExchange(h.url, "GET", [], b"", h.status, "Moved", h.headers, h.body, when,
                     truncated=h.truncated)
        for h in (first, second)
    ]  # fmt: skip
    page = HttpExchange(
        "https://a.test/p", "GET", [], b"", 200, "OK", [("Content-Type", "text/html")], b"page",
        when,
    )  # fmt: skip
    with RollingWarcWriter(tmp_path, "w1") as writer:
        locations = writer.write_exchanges([*exchanges, page])
    [path] = sorted(tmp_path.glob("*.warc.gz"))
    with open(path, "rb") as stream:
        records = [
            (r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.http_headers)
            for r in ArchiveIterator(stream)
            if r.rec_type == "response"
        ]
    assert [(t, u) for t, u, _ in records] == [
        ("response", "http://a.test/x"),
        ("response", "https://a.test/x/"),
        ("response", "https://a.test/p"),
    ]
    assert records[0][2].get_statuscode() == "301"
    assert records[0][2].get_header("Location") == "https://a.test/x/"
    assert records[0][2].get_header("X-Crawler-Content-Encoding") == "gzip"
    assert records[0][2].get_header("Content-Encoding") is None
    stored = [read_payload(path, loc.offset, loc.length) for loc in locations]
    assert [s.body for s in stored] == [MOVED, b"", b"page"]
    with open(path, "rb") as stream:
        truncated = [
            r.rec_headers.get_header("WARC-Truncated")
            for r in ArchiveIterator(stream)
            if r.rec_type == "response"
        ]
    assert truncated == [None, TRUNCATED_LENGTH, None]
    lines = index_bytes(path).decode().splitlines()
    entry = find(lines, "http://a.test/x")
    assert entry is not None and entry.status == 301 and entry.offset == locations[0].offset
    by_url = (json.loads(line.split(" ", 2)[2]) for line in lines)
    fields = {f["url"]: f for f in by_url}
    assert fields["http://a.test/x"]["redirect"] == "https://a.test/x/"
    assert fields["https://a.test/x/"]["status"] == "302"
    assert fields["https://a.test/x/"]["redirect"] == "/p"  # as the header says
    assert "redirect" not in fields["https://a.test/p"]
    assert fields["https://a.test/p"]["status"] == "200"
