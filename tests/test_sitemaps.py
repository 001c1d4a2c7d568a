"""WebSpider.parse_sitemap and on_error, on responses built in memory (no network)."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from lxml import etree
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response, XmlResponse
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

import spiders.sitemaps as sitemaps
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY, SEED_META_KEY
from spiders.web import (
    CHANGEFREQ_META_KEY,
    LASTMOD_META_KEY,
    SITEMAP_MAX_ENTRIES,
    SITEMAP_META_KEY,
    WebSpider,
)

SEED = "http://127.0.3.1:8000/"
HOST = "127.0.3.1:8000"
OTHER = "http://127.0.3.2:8000"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def make_spider(
    seeds: str = SEED, scope: str = "hosts", settings: dict[str, Any] | None = None
) -> WebSpider:
    crawler = get_crawler(WebSpider, settings or {})
    spider = WebSpider.from_crawler(crawler, seeds=seeds, scope=scope)
    assert isinstance(spider, WebSpider)
    return spider


def stats(spider: WebSpider) -> dict[str, Any]:
    crawler: Crawler = spider.crawler
    return {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("sitemap/")}


def urlset(*entries: tuple[str, str | None]) -> bytes:
    urls = "".join(
        f"<url><loc>{loc}</loc>{f'<lastmod>{lastmod}</lastmod>' if lastmod else ''}</url>"
        for loc, lastmod in entries
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>{urls}</urlset>'.encode()


def sitemapindex(*locs: str) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0"?><sitemapindex {NS}>{items}</sitemapindex>'.encode()


def sitemap_response(
    body: bytes,
    url: str = SEED + "sitemap.xml",
    scope: str | None = HOST,
    cls: type[Response] = XmlResponse,
) -> Response:
    request = Request(url, meta={SCOPE_META_KEY: scope, SITEMAP_META_KEY: True})
    return cls(url=url, body=body, request=request)


def run(spider: WebSpider, response: Response) -> list[Request]:
    out = list(spider.parse_sitemap(response))
    assert all(isinstance(r, Request) for r in out)
    return out


def test_urlset_plain() -> None:
    spider = make_spider()
    body = urlset((SEED + "a", None), (SEED + "b", "2024-05-01"))
    requests = run(spider, sitemap_response(body))
    assert [r.url for r in requests] == [SEED + "a", SEED + "b"]
    for r in requests:
        assert r.callback == spider.parse
        assert r.errback == spider.on_error
        assert r.meta[SCOPE_META_KEY] == HOST
        assert SITEMAP_META_KEY not in r.meta
        assert SEED_META_KEY not in r.meta
    assert LASTMOD_META_KEY not in requests[0].meta
    assert requests[1].meta[LASTMOD_META_KEY] == "2024-05-01"
    assert stats(spider) == {"sitemap/urls": 2}


def test_urlset_gzipped_octet_stream_carries_lastmod() -> None:
    spider = make_spider()
    body = gzip.compress(
        urlset((SEED + "x", "2023-01-02T03:04:05+00:00"), (SEED + "y", None), (SEED + "z", ""))
    )
    response = sitemap_response(body, url=SEED + "sitemap.xml.gz", cls=Response)
    requests = run(spider, response)
    assert [r.url for r in requests] == [SEED + "x", SEED + "y", SEED + "z"]
    assert requests[0].meta == {
        SCOPE_META_KEY: HOST,
        LASTMOD_META_KEY: "2023-01-02T03:04:05+00:00",
    }
    assert requests[1].meta == {SCOPE_META_KEY: HOST}
    assert requests[2].meta == {SCOPE_META_KEY: HOST}  # empty <lastmod/>: absent
    assert stats(spider) == {"sitemap/urls": 3}


def test_sitemapindex_yields_child_sitemaps() -> None:
    spider = make_spider()
    body = sitemapindex(SEED + "s1.xml", SEED + "s2.xml.gz", OTHER + "/s3.xml")
    requests = run(spider, sitemap_response(body, url=SEED + "sitemap_index.xml"))
    assert [r.url for r in requests] == [SEED + "s1.xml", SEED + "s2.xml.gz"]
    for r in requests:
        assert r.callback == spider.parse_sitemap
        assert r.errback == spider.on_error
        assert r.meta == {SCOPE_META_KEY: HOST, SITEMAP_META_KEY: True}
    assert stats(spider) == {"sitemap/sitemaps": 2, "sitemap/out_of_scope": 1}


def test_scope_value_none_is_passed_on() -> None:
    """The middleware may not know the scope: seed hosts are still in scope."""
    spider = make_spider()
    requests = run(spider, sitemap_response(urlset((SEED + "a", None)), scope=None))
    assert [r.url for r in requests] == [SEED + "a"]
    assert requests[0].meta == {SCOPE_META_KEY: None}


def test_scope_meta_makes_a_non_seed_host_in_scope() -> None:
    spider = make_spider()
    url = OTHER + "/sitemap.xml"
    response = sitemap_response(urlset((OTHER + "/p", None), (SEED + "q", None)), url=url)
    # scope is the seed host, not 127.0.3.2: only the seed host's URL is taken
    assert [r.url for r in run(spider, response)] == [SEED + "q"]
    response = sitemap_response(
        urlset((OTHER + "/p", None), (SEED + "q", None), ("http://127.0.3.3/r", None)),
        url=url,
        scope="127.0.3.2:8000",
    )
    assert [r.url for r in run(spider, response)] == [OTHER + "/p", SEED + "q"]
    assert stats(spider) == {"sitemap/urls": 3, "sitemap/out_of_scope": 2}


def test_scope_any_takes_everything() -> None:
    spider = make_spider(scope="any")
    body = urlset((OTHER + "/p", None), ("https://example.com/q", None))
    requests = run(spider, sitemap_response(body, scope=None))
    assert [r.url for r in requests] == [OTHER + "/p", "https://example.com/q"]
    assert stats(spider) == {"sitemap/urls": 2}


def test_out_of_scope_entries_counted_and_dropped() -> None:
    spider = make_spider()
    body = urlset((SEED + "in", None), (OTHER + "/out1", None), ("https://example.com/", None))
    requests = run(spider, sitemap_response(body))
    assert [r.url for r in requests] == [SEED + "in"]
    assert stats(spider) == {"sitemap/urls": 1, "sitemap/out_of_scope": 2}


def test_non_http_loc_counted() -> None:
    spider = make_spider()
    body = urlset(
        ("ftp://127.0.3.1/file", None),
        ("mailto:a@example.com", None),
        ("/relative/path", None),
        ("http://[::1", None),
        ("http://", None),
        (SEED + "ok", None),
    )
    body = body.replace(b"</urlset>", b"<url><loc></loc></url><url><loc/></url></urlset>")
    requests = run(spider, sitemap_response(body))
    assert [r.url for r in requests] == [SEED + "ok"]
    assert stats(spider) == {"sitemap/urls": 1, "sitemap/bad_url": 7}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\x1f\x8bnot really gzip", id="gzip-garbage"),
        pytest.param(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff", id="bad-deflate"),
        pytest.param(b"\x1f\x8b", id="gzip-magic-only"),
    ],
)
def test_corrupt_gzip_is_invalid(body: bytes, caplog: pytest.LogCaptureFixture) -> None:
    spider = make_spider()
    with caplog.at_level(logging.WARNING, logger="spiders.sitemaps"):
        requests = run(spider, sitemap_response(body, url=SEED + "s.xml.gz", cls=Response))
    assert requests == []
    assert stats(spider) == {"sitemap/invalid": 1}
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"this is not xml", id="text"),
        pytest.param(b"<?xml version='1.0'?>", id="no-root"),
        pytest.param(b"<html><body><a href='/x'>x</a></body></html>", id="html-root"),
        pytest.param(b"<rss><channel/></rss>", id="rss-root"),
        pytest.param(gzip.compress(b"\x00\x01garbage"), id="gzipped-garbage"),
    ],
)
def test_malformed_xml_is_invalid(body: bytes, caplog: pytest.LogCaptureFixture) -> None:
    spider = make_spider()
    with caplog.at_level(logging.WARNING, logger="spiders.sitemaps"):
        requests = run(spider, sitemap_response(body))
    assert requests == []
    assert stats(spider) == {"sitemap/invalid": 1}
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_error_while_iterating_keeps_earlier_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    class BreakingSitemap:
        type = "urlset"

        def __init__(self, body: bytes) -> None:
            pass

        def __iter__(self) -> Iterator[dict[str, Any]]:
            yield {"loc": SEED + "a"}
            raise etree.LxmlError("broken")

    monkeypatch.setattr(sitemaps, "Sitemap", BreakingSitemap)
    spider = make_spider()
    requests = run(spider, sitemap_response(b"<urlset/>"))
    assert [r.url for r in requests] == [SEED + "a"]
    assert stats(spider) == {"sitemap/urls": 1, "sitemap/invalid": 1}


def test_gzip_over_max_size_is_invalid(caplog: pytest.LogCaptureFixture) -> None:
    spider = make_spider(settings={"DOWNLOAD_MAXSIZE": 10_000})
    body = gzip.compress(urlset(*[(f"{SEED}page/{i}", None) for i in range(1000)]))
    assert len(body) < 10_000
    with caplog.at_level(logging.WARNING, logger="spiders.sitemaps"):
        requests = run(spider, sitemap_response(body, url=SEED + "big.xml.gz", cls=Response))
    assert requests == []
    assert stats(spider) == {"sitemap/invalid": 1}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "10000 bytes" in warnings[0].getMessage()


def test_gzip_max_size_zero_falls_back_to_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sitemaps, "SITEMAP_MAX_BYTES", 5_000)
    spider = make_spider(settings={"DOWNLOAD_MAXSIZE": 0})
    big = gzip.compress(urlset(*[(f"{SEED}page/{i}", None) for i in range(1000)]))
    assert run(spider, sitemap_response(big, url=SEED + "big.xml.gz", cls=Response)) == []
    small = gzip.compress(urlset((SEED + "a", None)))
    assert len(run(spider, sitemap_response(small, url=SEED + "a.xml.gz", cls=Response))) == 1
    assert stats(spider) == {"sitemap/invalid": 1, "sitemap/urls": 1}


def test_gzip_over_warn_size_warns_but_parses(caplog: pytest.LogCaptureFixture) -> None:
    spider = make_spider(settings={"DOWNLOAD_WARNSIZE": 2_000})
    body = gzip.compress(urlset(*[(f"{SEED}page/{i}", None) for i in range(100)]))
    assert len(body) < 2_000
    with caplog.at_level(logging.WARNING, logger="spiders.sitemaps"):
        requests = run(spider, sitemap_response(body, url=SEED + "s.xml.gz", cls=Response))
    assert len(requests) == 100
    assert any("warning size" in r.getMessage() for r in caplog.records)


def test_entry_cap(caplog: pytest.LogCaptureFixture) -> None:
    spider = make_spider()
    n = SITEMAP_MAX_ENTRIES + 1
    assert SITEMAP_MAX_ENTRIES == 50_000
    body = gzip.compress(urlset(*[(f"{SEED}p/{i}", None) for i in range(n + 9)]))
    with caplog.at_level(logging.WARNING, logger="spiders.web"):
        requests = run(spider, sitemap_response(body, url=SEED + "huge.xml.gz", cls=Response))
    assert len(requests) == SITEMAP_MAX_ENTRIES
    assert requests[-1].url == f"{SEED}p/{SITEMAP_MAX_ENTRIES - 1}"
    assert stats(spider) == {"sitemap/urls": SITEMAP_MAX_ENTRIES, "sitemap/truncated": 1}
    assert len([r for r in caplog.records if "entries" in r.getMessage()]) == 1


def test_entry_cap_counts_skipped_entries() -> None:
    spider = make_spider()
    entries = [(OTHER + f"/{i}", None) for i in range(SITEMAP_MAX_ENTRIES)]
    body = urlset(*entries, (SEED + "late", None))
    assert run(spider, sitemap_response(body)) == []
    assert stats(spider) == {
        "sitemap/out_of_scope": SITEMAP_MAX_ENTRIES,
        "sitemap/truncated": 1,
    }


def test_exactly_max_entries_is_not_truncated() -> None:
    spider = make_spider()
    body = urlset(*[(f"{SEED}p/{i}", None) for i in range(SITEMAP_MAX_ENTRIES)])
    assert len(run(spider, sitemap_response(body))) == SITEMAP_MAX_ENTRIES
    assert stats(spider) == {"sitemap/urls": SITEMAP_MAX_ENTRIES}


def _failure(exc: Exception, url: str) -> Failure:
    try:
        raise exc
    except Exception:
        failure = Failure()
    failure.request = Request(url)  # type: ignore[attr-defined]
    return failure


class ForbiddenByRobots(IgnoreRequest):
    pass


@pytest.mark.parametrize(
    ("exc", "level", "stat"),
    [
        (IgnoreRequest("Forbidden by robots.txt"), logging.DEBUG, "IgnoreRequest"),
        (ForbiddenByRobots("deferred"), logging.DEBUG, "ForbiddenByRobots"),
        (ConnectionRefusedError("refused"), logging.INFO, "ConnectionRefusedError"),
    ],
)
def test_on_error_log_level(
    exc: Exception, level: int, stat: str, caplog: pytest.LogCaptureFixture
) -> None:
    spider = make_spider()
    with caplog.at_level(logging.DEBUG, logger="spiders.web"):
        spider.on_error(_failure(exc, SEED + "x"))
    records = [r for r in caplog.records if r.name == "spiders.web"]
    assert [r.levelno for r in records] == [level]
    assert SEED + "x" in records[0].getMessage()
    assert spider.crawler.stats.get_value(f"web/error/{stat}") == 1


def test_urlset_entry_changefreq_is_kept_for_recrawl() -> None:
    spider = make_spider()
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>" + SEED.encode() + b"daily</loc><changefreq>daily</changefreq></url>"
        b"<url><loc>" + SEED.encode() + b"plain</loc></url></urlset>"
    )
    requests = run(spider, sitemap_response(body))
    assert requests[0].meta[CHANGEFREQ_META_KEY] == "daily"
    assert CHANGEFREQ_META_KEY not in requests[1].meta
