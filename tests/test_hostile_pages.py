"""Limits and hostile pages (crawlproject/limits.py): one real crawl of a host
that serves every case, and unit tests of the pure decisions."""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.exceptions import DownloadCancelledError, DownloadTimeoutError, IgnoreRequest
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler
from twisted.internet.defer import CancelledError

from crawlproject import limits
from crawlproject.frontier.basics.request_meta import LEASE_META_KEY
from crawlproject.frontier.claims.leases import LeaseState
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from crawlproject.frontier.store.redis_frontier import Lease
from middlewares.limits import LimitsMiddleware
from spiders.web import WebSpider
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, fetch_counts, page_counts, politeness_report

DELAY = 0.1
MAX_SIZE_BYTES = 200_000
TIMEOUT_SECONDS = 1
MAX_LINKS = 20
MAX_REDIRECTS = 3
SETTINGS: dict[str, object] = {
    "CRAWL_HOST_DELAY": DELAY,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "CRAWL_ADAPTIVE_DELAY_FACTOR": 0,  # the slow route must not slow the host down
    "DOWNLOAD_MAXSIZE": MAX_SIZE_BYTES,
    "DOWNLOAD_WARNSIZE": MAX_SIZE_BYTES // 2,
    "DOWNLOAD_TIMEOUT": TIMEOUT_SECONDS,
    "RETRY_TIMES": 1,
    "REDIRECT_MAX_TIMES": MAX_REDIRECTS,
    "CRAWL_MAX_LINKS_PER_PAGE": MAX_LINKS,
    # The /m?i=N pages are one route, one body: not a duplicate streak to park.
    "CRAWL_DEDUPE_ENABLED": False,
}
HTML = "text/html; charset=utf-8"
LONG_PATH = "/long/" + "x" * 3000  # over CRAWL_MAX_URL_LENGTH (2048)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8).decode()
ERROR_PAGES = 5  # a 5xx storm: each page answers 500, retried once


def _page(*links: str, title: str = "page") -> str:
    hrefs = "".join(f'<a href="{href}">{href[:20]}</a>' for href in links)
    return f"<html><head><title>{title}</title></head><body>{hrefs}</body></html>"


def _html(body: str, **spec: Any) -> dict[str, Any]:
    return {"body": body, "content_type": HTML, **spec}


def _redirect(to: str) -> dict[str, Any]:
    return {"status": 302, "headers": {"Location": to}}


def hostile_routes() -> dict[str, dict[str, Any]]:
    """Every hostile case as a special route of one host, all linked from /hostile."""
    routes: dict[str, dict[str, Any]] = {
        "/big": _html("x" * 1000, repeat=MAX_SIZE_BYTES // 1000 + 50),
        # ~10 KB on the wire, 10 MB once decompressed
        "/bomb": _html("0" * 1000, repeat=10_000, gzip=True, headers={"Content-Encoding": "gzip"}),
        "/slow": _html(_page(), delay=TIMEOUT_SECONDS + 1.5),
        "/loop/a": _redirect("/loop/b"),
        "/loop/b": _redirect("/loop/a"),
        "/self": _redirect("/self"),
        # Unclosed tags, a stray quote, a broken comment: lxml recovers the link.
        "/malformed": _html(
            '<html><body><div><p>text<table><tr><td>cell <a href="/from-malformed">x</a>'
            '<b class="oops>bold</p><!-- broken -- comment <span>'
        ),
        "/from-malformed": _html(_page()),
        "/bad-charset": {
            "body": _page("/from-bad-charset"),
            "content_type": "text/html; charset=no-such-charset",
        },
        "/from-bad-charset": _html(_page()),
        # Declared UTF-8, sent as Latin-1.
        "/wrong-charset": {
            "body_b64": base64.b64encode(_page(title="caf\xe9").encode("latin-1")).decode(),
            "content_type": HTML,
        },
        "/no-charset": {"body": _page(), "content_type": "text/html"},
        "/binary": {"body_b64": PNG, "content_type": "text/html"},
        "/empty": _html(""),
        "/many": _html(_page(*(f"/m?i={i}" for i in range(MAX_LINKS * 2)))),
        "/m": _html(_page()),
        "/long-link": _html(_page(LONG_PATH)),
    }
    chain = [f"/chain/{i}" for i in range(1, MAX_REDIRECTS + 4)]
    for here, there in itertools.pairwise(chain):
        routes[here] = _redirect(there)
    routes[chain[-1]] = _html(_page())
    for i in range(ERROR_PAGES):
        routes[f"/err/{i}"] = _html("<html>down</html>", status=500)
    hub_links = [p for p in routes if p not in ("/m", "/loop/b") and not p.startswith("/from-")]
    hub_links = [p for p in hub_links if not p.startswith("/chain/") or p == chain[0]]
    routes["/hostile"] = _html(_page(*hub_links))
    return routes


def test_every_hostile_page_is_counted_and_the_crawl_ends(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=1, pages=4, latency_ms=0, links=2, cross_links=0, query_variants=0,
        special={1: hostile_routes()},
    )  # fmt: skip
    base = web.base_url(1).rstrip("/")
    out = tmp_path / "hostile.jsonl"
    proc = start_worker(
        REPO_ROOT, redis_server.url, "hostile", [web.base_url(1), base + "/hostile"], SETTINGS,
        tmp_path / "hostile.log", extra_args=["-O", str(out)],
    )  # fmt: skip
    started = time.monotonic()
    # Leases are renewed while the worker lives: a lease never finished keeps
    # the crawl from ending at all, so ending is the proof.
    assert wait_all([proc], timeout=90) == [0]
    assert time.monotonic() - started < 60
    log = proc.log_path.read_text()
    assert "Traceback" not in log
    stats = stats_of(proc.log_path)

    for stat, count in {
        "limits/body_too_large": 1,
        "limits/decompressed_too_large": 1,
        "limits/timeout": 1,
        "limits/redirects_exhausted": 1,
        "limits/redirect_loop": 2,  # /loop/a <-> /loop/b, and /self
        "limits/links_truncated": 1,
        "rules/url_too_long": 1,
        "content/empty_body": 1,
        "content/binary_as_text": 1,
        "content/bad_charset": 2,  # an unknown charset, and Latin-1 declared as UTF-8
        "content/no_charset": 1,
        "retry/max_reached": ERROR_PAGES + 1,  # the 5xx storm and the timeout
    }.items():
        assert stats.get(stat, 0) == count, (stat, stats.get(stat))
    # One log line per outcome (Scrapy's own warnings aside).
    assert log.count("limits/decompressed_too_large: ") == 1
    assert log.count("limits/redirect_loop: ") == 2
    assert log.count("content/binary_as_text at ") == 1

    # Every URL finished: each claim acked, or given back (robots.txt) and acked later.
    assert stats["frontier/acks"] + stats["frontier/deferred"] == stats["frontier/claims"]
    assert "frontier/leases_reclaimed" not in stats

    fetches = fetch_counts(web.log)
    pages = page_counts(web.log)
    url = base.__add__
    for path, n in {
        "/bomb": 1, "/big": 1, "/slow": 2, "/self": 1, "/loop/a": 1, "/loop/b": 1,
        "/chain/1": 1, f"/chain/{MAX_REDIRECTS + 1}": 1, f"/chain/{MAX_REDIRECTS + 2}": 0,
        "/from-malformed": 1, "/from-bad-charset": 1, "/empty": 1, "/binary": 1,
    }.items():  # fmt: skip
        assert pages.get(url(path), 0) == n, (path, pages.get(url(path)))
    assert sum(n for u, n in fetches.items() if "/m?i=" in u) == MAX_LINKS
    assert all(pages[url(f"/err/{i}")] == 2 for i in range(ERROR_PAGES))
    assert not [u for u in fetches if "/long/" in u]
    # Every normal page fetched, once.
    assert all(pages.get(u) == 1 for u in web.expected_urls), pages

    items = {i["url"]: i for i in map(json.loads, out.read_text().splitlines())}
    assert items[url("/bomb")]["limit"] == "decompressed_too_large"
    assert items[url("/big")]["limit"] == "body_too_large"
    assert items[url("/slow")]["limit"] == "timeout"
    assert items[url("/chain/1")]["limit"] == "redirects_exhausted"
    assert items[url("/loop/a")]["limit"] == "redirect_loop"
    assert items[url("/binary")]["content_problem"] == "binary_as_text"
    assert items[url("/empty")]["content_problem"] == "empty_body"

    # Politeness held through every case (the slow route's server-side record
    # outlives the client's timeout, so it is left out).
    steady = [r for r in web.log if r.path != "/slow"]
    for host, p in politeness_report(steady, DELAY).items():
        assert p.max_in_flight <= 1, (host, p)


def test_a_gzip_bomb_is_fetched_once_and_its_url_finished(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """The bug: HttpCompressionMiddleware raises in process_response, which
    Scrapy sends past every process_exception: the ack middleware never saw it
    and the worker held the bomb's lease for ever (renewing it), so the crawl
    never ended. Now the errback finishes it."""
    bomb = _html("0" * 1000, repeat=10_000, gzip=True, headers={"Content-Encoding": "gzip"})
    web = testweb_factory(
        hosts=1, pages=3, latency_ms=0, links=2, cross_links=0, query_variants=0,
        special={1: {"/bomb": bomb}},
    )  # fmt: skip
    bomb_url = web.base_url(1) + "bomb"
    lease_seconds = 30.0
    settings = {**SETTINGS, "CRAWL_LEASE_SECONDS": lease_seconds}
    proc = start_worker(
        REPO_ROOT, redis_server.url, "bomb", [web.base_url(1), bomb_url], settings,
        tmp_path / "bomb.log",
    )  # fmt: skip
    started = time.monotonic()
    assert wait_all([proc], timeout=60) == [0]
    assert time.monotonic() - started < lease_seconds
    stats = stats_of(proc.log_path)
    assert stats["limits/decompressed_too_large"] == 1
    assert stats["frontier/outcome/failed"] == 1
    assert stats["frontier/acks"] + stats["frontier/deferred"] == stats["frontier/claims"]
    pages = page_counts(web.log)
    assert pages[bomb_url] == 1
    assert all(pages.get(u) == 1 for u in web.expected_urls), pages


# -- unit tests ---------------------------------------------------------------------


def _bomb_failure() -> IgnoreRequest:
    crawler = get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": 10_000})
    middleware = HttpCompressionMiddleware.from_crawler(crawler)
    request = Request("http://a.example/bomb")
    response = HtmlResponse(
        request.url,
        body=gzip.compress(b"0" * 100_000),
        headers={"Content-Encoding": "gzip"},
        request=request,
    )
    with pytest.raises(IgnoreRequest) as info:
        middleware.process_response(request, response)
    return info.value


def _max_redirects_failure() -> IgnoreRequest:
    crawler = get_crawler(settings_dict={"REDIRECT_MAX_TIMES": 1})
    middleware = RedirectMiddleware.from_crawler(crawler)
    request = Request("http://a.example/1", meta={"redirect_times": 1, "redirect_ttl": 1})
    response = Response(request.url, status=302, headers={"Location": "/2"}, request=request)
    with pytest.raises(IgnoreRequest) as info:
        middleware.process_response(request, response)
    return info.value


def test_limit_of_failure_names_scrapys_real_failures() -> None:
    assert limits.limit_of_failure(_bomb_failure()) == limits.DECOMPRESSED_TOO_LARGE
    assert limits.limit_of_failure(_max_redirects_failure()) == limits.REDIRECTS_EXHAUSTED
    assert limits.limit_of_failure(DownloadTimeoutError("slow")) == limits.TIMEOUT
    assert limits.limit_of_failure(DownloadCancelledError("big")) == limits.BODY_TOO_LARGE
    assert limits.limit_of_failure(CancelledError()) == limits.BODY_TOO_LARGE
    assert limits.limit_of_failure(limits.RedirectLoop("x")) == limits.REDIRECT_LOOP
    # robots.txt's refusals and other failures are no limit
    assert limits.limit_of_failure(IgnoreRequest("forbidden by robots.txt")) is None
    assert limits.limit_of_failure(ConnectionRefusedError()) is None
    assert limits.limit_of_failure(None) is None


@pytest.mark.parametrize(
    ("body", "mime", "content_type", "expected"),
    [
        (b"", "text/html", "", limits.EMPTY_BODY),
        (b"", "application/pdf", "", limits.EMPTY_BODY),
        (b"\x89PNG\r\n\x1a\n....", "text/html", "", limits.BINARY_AS_TEXT),
        (b"<html>\x00\x01</html>", "text/plain", "", limits.BINARY_AS_TEXT),
        (b"%PDF-1.7 ...", "application/xhtml+xml", "", limits.BINARY_AS_TEXT),
        (b"%PDF-1.7 ...", "application/pdf", "", None),  # binary by nature
        (b"<html>ok</html>", "text/html", "", None),
        ("<p>é</p>".encode("utf-16"), "text/html", "", None),  # a BOM
        ("<p>é</p>".encode("utf-16-le"), "text/html", "text/html; charset=UTF-16LE", None),
    ],
)
def test_body_problem(body: bytes, mime: str, content_type: str, expected: str | None) -> None:
    assert limits.body_problem(body, mime, content_type) == expected


@pytest.mark.parametrize(
    ("content_type", "body", "used", "expected"),
    [
        ("text/html; charset=utf-8", b"<p>ok</p>", "utf-8", None),
        ("text/html; charset=no-such", b"<p>ok</p>", "ascii", limits.BAD_CHARSET),
        ('text/html; charset="utf-8"', "café".encode("latin-1"), "utf-8", limits.BAD_CHARSET),
        ("text/html", b'<meta charset="utf-8"><p>ok</p>', "utf-8", None),
        ("text/html", b"\xef\xbb\xbf<p>ok</p>", "utf-8", None),
        ("text/html", b"<p>ok</p>", "ascii", limits.NO_CHARSET),
        ("", b"<p>ok</p>", "ascii", limits.NO_CHARSET),
    ],
)
def test_charset_problem(content_type: str, body: bytes, used: str, expected: str | None) -> None:
    assert limits.charset_problem(content_type, body, used) == expected


@pytest.mark.parametrize(
    ("url", "chain", "location", "expected"),
    [
        ("http://a.example/a", [], "/a", "http://a.example/a"),
        ("http://a.example/b", ["http://a.example/a"], "/a", "http://a.example/a"),
        (
            "http://a.example/b",
            ["http://a.example/a"],
            "http://a.example/a#top",
            "http://a.example/a",
        ),
        ("http://a.example/b", ["http://a.example/a"], "/c", None),
        ("http://a.example/a", [], "https://a.example/a", None),  # http -> https goes on
        ("http://a.example/a", [], None, None),
    ],
)
def test_redirect_loop_target(
    url: str, chain: list[str], location: str | None, expected: str | None
) -> None:
    assert limits.redirect_loop_target(url, chain, location) == expected


def test_redirect_loop_middleware_raises_once_it_loops() -> None:
    middleware = LimitsMiddleware.from_crawler(get_crawler())
    request = Request("http://a.example/b", meta={"redirect_urls": ["http://a.example/a"]})
    onward = Response(request.url, status=302, headers={"Location": "/c"}, request=request)
    assert middleware.process_response(request, onward) is onward
    back = Response(request.url, status=301, headers={"Location": "/a"}, request=request)
    with pytest.raises(limits.RedirectLoop):
        middleware.process_response(request, back)
    request.meta["dont_redirect"] = True
    assert middleware.process_response(request, back) is back


def test_links_are_capped_and_counted_once_per_page() -> None:
    crawler = get_crawler(WebSpider, settings_dict={"CRAWL_MAX_LINKS_PER_PAGE": 3})
    assert crawler.stats is not None
    crawler.stats.open_spider()
    spider = WebSpider.from_crawler(crawler, seeds="http://a.example/")
    response = HtmlResponse("http://a.example/", body=b"")
    links = (f"http://a.example/{i}" for i in range(10))
    assert list(spider._capped_links(links, response)) == [
        f"http://a.example/{i}" for i in range(3)
    ]
    assert (
        list(spider._capped_links(["http://a.example/x"] * 3, response))
        == ["http://a.example/x"] * 3
    )
    assert crawler.stats.get_value(limits.LINKS_TRUNCATED) == 1


def test_download_failed_finishes_a_lease_once_and_leaves_the_rest() -> None:
    crawler = get_crawler(
        settings_dict={"SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler"}
    )
    scheduler = FrontierScheduler.from_crawler(crawler)
    leases = scheduler.leases

    def leased(token_id: int, state: LeaseState) -> Request:
        request = Request("http://a.example/")
        leases.hold(Lease(0, token_id), request, state)
        return request

    bomb = leased(1, LeaseState.DOWNLOADED)  # failed in a process_response
    leases.failed(bomb, IgnoreRequest("over DOWNLOAD_MAXSIZE"))
    leases.failed(bomb, IgnoreRequest("over DOWNLOAD_MAXSIZE"))  # idempotent
    assert [lease.id for _, lease in scheduler.outbox.pending_acks] == [1]
    # The spider middleware acks an HttpError's lease after its record is stored.
    http_error = leased(2, LeaseState.SCRAPING)
    leases.failed(http_error, IgnoreRequest("HttpError"))
    assert http_error.meta[LEASE_META_KEY] == "0:2"
    assert leases.state_of(http_error) is LeaseState.SCRAPING
    # robots.txt gave the URL back (defer): no lease here any more, nothing acked.
    deferred = Request("http://a.example/", meta={LEASE_META_KEY: "0:3"})
    leases.failed(deferred, IgnoreRequest("robots.txt"))
    assert [lease.id for _, lease in scheduler.outbox.pending_acks] == [1]


def test_sitemaps_may_be_larger_than_pages() -> None:
    middleware = LimitsMiddleware.from_crawler(
        get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": 1000})
    )
    sitemap = Request("http://a.example/sitemap.xml", meta={"crawl_sitemap": True})
    page = Request("http://a.example/")
    for request in (sitemap, page):
        middleware.process_request(request)
    assert sitemap.meta["download_maxsize"] == limits.SITEMAP_MAX_BYTES
    assert "download_maxsize" not in page.meta
    unlimited = LimitsMiddleware.from_crawler(get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": 0}))
    assert unlimited.sitemap_maxsize == 0
