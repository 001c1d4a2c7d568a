"""The compact request form (crawlproject/frontier/store/codec.py): a link of the web
spider is its URL and depth; everything else round-trips exactly, whole and in
its stored form (the URL after the host key); the JSON of earlier versions is
read; broken forms are refused with a clear error."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest

from crawlproject import default_settings
from crawlproject.frontier.store.codec import (
    RequestCodec,
    RequestDecodeError,
    stored_form,
    url_of,
    whole_form,
)

CODEC = RequestCodec(default_settings.CRAWL_REQUEST_CLASSES)


class _Spider(Spider):
    name = "s"

    def parse(self, response: object) -> None: ...

    def on_error(self, failure: object) -> None: ...


def test_codec_web_spider_link_is_its_url_and_depth() -> None:
    spider = _Spider()
    link = Request(
        "http://e.com:8080/a/b.html",
        callback=spider.parse,
        errback=spider.on_error,
        meta={"crawl_scope": "e.com:8080", "depth": 2, "crawl_lease": "0:1"},
    )
    data = CODEC.encode(link, spider)
    assert data == b"G2http://e.com:8080/a/b.html"  # parse, on_error, own scope: tag G
    stored = stored_form(data, "e.com:8080")  # in the host's queue: after http:// + key + /
    assert stored == b"g2a/b.html"
    assert whole_form(stored, "e.com:8080") == data
    out = CODEC.decode(data, spider)
    assert out.meta == {"crawl_scope": "e.com:8080", "depth": 2}
    assert (out.callback, out.errback) == (spider.parse, spider.on_error)


def _fields(r: Request) -> tuple[object, ...]:
    return (
        type(r), r.url, r.method, r.headers.to_unicode_dict(), r.body, r.cookies, r.meta,
        r.encoding, r.priority, r.dont_filter, r.flags, r.cb_kwargs, r.callback, r.errback,
    )  # fmt: skip


def _requests(spider: _Spider) -> list[Request]:
    cb = {"callback": spider.parse, "errback": spider.on_error}
    return [
        Request("http://e.com/", **cb),  # type: ignore[arg-type]
        Request("https://e.com/x?q=1", meta={"depth": 0, "crawl_scope": "e.com"}),
        Request("http://e.com/x", meta={"depth": 7, "crawl_scope": "other.org"}, **cb),  # type: ignore[arg-type]
        Request("http://e.com/x", meta={"depth": "3", "crawl_scope": None}),
        Request("http://e.com/x", meta={"depth": True, "crawl_seed": True, "n": [1, "a"]}),
        Request("http://e.com/x", callback=spider.on_error, errback=spider.parse),
        Request("http://e.com/x", callback=spider.parse, priority=2, dont_filter=True),
        Request("http://E.com:80/x", meta={"crawl_scope": "e.com:80", "depth": 1}),
        Request("http://e.com/caf%C3%A9", headers={"A": ["1", "2"]}, cookies={"k": "v"}),
        Request("http://e.com/p", method="POST", body=b"\x00\n\xff", flags=["f"]),
        Request("http://e.com/p", encoding="latin-1", cb_kwargs={"x": {"y": 1}}),
        Request("http://[::1]:8080/p", meta={"crawl_scope": "::1:8080", "depth": 12}),
        FormRequest("http://e.com/f", formdata={"a": "1"}, meta={"depth": 2}),
    ]


@pytest.mark.parametrize("index", range(13))
@pytest.mark.parametrize("key", ["e.com", "http://e.com", "e.com:8080", "other.org", "[::1]:8080"])
def test_codec_round_trips_exactly_whole_and_stored(index: int, key: str) -> None:
    spider = _Spider()
    req = _requests(spider)[index]
    data = CODEC.encode(req, spider)
    assert _fields(CODEC.decode(data, spider)) == _fields(req)
    stored = stored_form(data, key)
    assert whole_form(stored, key) == data
    assert _fields(CODEC.decode(whole_form(stored, key), spider)) == _fields(req)
    assert url_of(data) == req.url


def test_codec_reads_the_json_of_earlier_versions() -> None:
    old = b'{"url":"http://e.com/a","callback":"parse","meta":{"crawl_scope":"e.com","depth":1}}'
    spider = _Spider()
    out = CODEC.decode(old, spider)
    assert (out.url, out.meta, out.callback) == (
        "http://e.com/a", {"crawl_scope": "e.com", "depth": 1}, spider.parse
    )  # fmt: skip
    assert url_of(old) == "http://e.com/a" and stored_form(old, "e.com") == old


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"W2/a/b.html", "without its host key"),  # a stored form, read as it is
        (b"g2a/b.html", "without its host key"),
        (b"~http://e.com/", "not a stored request"),
        (b"@http://e.com/\n{not json", "not JSON"),
        (b"@http://e.com/\n[1]", "not an object"),
        (b'@http://e.com/\n{"meta": 3}', "not an object"),
        (b"", "empty"),
    ],
)
def test_codec_refuses_broken_compact_forms(data: bytes, why: str) -> None:
    with pytest.raises(RequestDecodeError, match=why):
        CODEC.decode(data, _Spider())


@pytest.mark.parametrize(
    ("url", "key", "stored"),
    [
        ("http://e.com/a", "e.com", b"c3a"),  # the "/" after the key dropped
        ("https://e.com/a", "e.com", b"k3a"),
        ("http://e.com/", "e.com", b"c3"),
        ("http://e.com/2020/a", "e.com", b"S3/2020/a"),  # a digit after it: kept
        ("http://e.com/a", "http://e.com", b"s3a"),  # a key with its scheme
        ("http://e.com:8/9", "e.com:8", b"S3/9"),
    ],
)
def test_codec_stored_form_drops_the_slash_after_the_key(url: str, key: str, stored: bytes) -> None:
    spider = _Spider()
    req = Request(url, callback=spider.parse, errback=spider.on_error, meta={"depth": 3})
    data = CODEC.encode(req, spider)
    assert stored_form(data, key) == stored
    assert whole_form(stored, key) == data
    assert _fields(CODEC.decode(whole_form(stored, key), spider)) == _fields(req)


@pytest.mark.parametrize(
    ("old", "key"),
    [
        (b"W2/a/b.html", "e.com:8080"),  # after http:// + key, its "/" kept: before 2026-12-08
        (b"_2/a/b.html", "e.com:8080"),  # after https:// + key
        (b"O2/a/b.html", "http://e.com:8080"),  # after a key with its scheme
    ],
)
def test_codec_reads_the_stored_forms_of_earlier_versions(old: bytes, key: str) -> None:
    spider = _Spider()
    scheme = "https" if old[:1] == b"_" else "http"
    out = CODEC.decode(whole_form(old, key), spider)
    assert out.url == f"{scheme}://e.com:8080/a/b.html"
    assert (out.meta, out.callback, out.errback) == (
        {"depth": 2, "crawl_scope": "e.com:8080"}, spider.parse, spider.on_error
    )  # fmt: skip
