"""The synthetic loopback web: serving, latency, logging, graph, analysis helpers."""

from __future__ import annotations

import base64
import difflib
import gzip
import hashlib
import html
import http.client
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

from testkit.testweb import (
    CALENDAR_START,
    ENGLISH_WORDS,
    MINTED_LINKS,
    OUT_OF_SCOPE_IP,
    POPULAR_PAGE,
    SESSION_PAGES,
    Link,
    RequestRecord,
    TestWeb,
    WebProcess,
    canonical_url,
    fetch_counts,
    fetches_by_host,
    host_ip,
    page_path,
    politeness_report,
    web_from_description,
)

WebFactory = Callable[..., TestWeb]
HREF = re.compile(r'href="([^"]*)"')


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def rec(ip: str, start: float, end: float, path: str = "/") -> RequestRecord:
    return RequestRecord(ip, 8000, path, "GET", start, end, 200, {}, 0, "")


def test_host_ips() -> None:
    assert [host_ip(i) for i in (1, 2, 250, 251, 500, 501)] == [
        "127.0.3.1", "127.0.3.2", "127.0.3.250", "127.0.4.1", "127.0.4.250", "127.0.5.1",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        host_ip(0)


def test_politeness_report_on_hand_made_log() -> None:
    log = [
        rec("a", 1.0, 2.0),  # out of order on purpose: the report sorts by start
        rec("a", 0.0, 1.0),
        rec("a", 0.5, 1.5),
        rec("a", 3.0, 3.2),
        rec("b", 0.0, 1.0),
        rec("c", 0.0, 1.0),
        rec("c", 1.0, 2.0),  # touches the previous one: not concurrent
    ]
    report = politeness_report(log, delay=1.0)
    a = report["a"]
    assert (a.requests, a.max_in_flight, a.min_gap, a.gaps_below_delay) == (4, 2, 0.5, 2)
    assert (a.min_idle, a.idle_below_delay) == (-0.5, 2)  # idle: 3.0 - max(end so far)
    b = report["b"]
    assert (b.requests, b.max_in_flight, b.min_gap, b.min_idle, b.gaps_below_delay) == (
        1, 1, None, None, 0,
    )  # fmt: skip
    c = report["c"]
    assert (c.max_in_flight, c.min_gap, c.min_idle, c.idle_below_delay) == (1, 1.0, 0.0, 1)
    # The tolerance forgives gaps just under the delay.
    assert politeness_report(log, delay=1.0, tolerance=0.6)["a"].gaps_below_delay == 0


def test_fetch_counts_and_canonical_url() -> None:
    assert canonical_url("HTTP://127.0.3.1:9/p/2?b=2&a=1#x") == "http://127.0.3.1:9/p/2?a=1&b=2"
    assert canonical_url("http://127.0.3.1:9") == "http://127.0.3.1:9/"
    log = [rec("127.0.3.1", 0, 1, p) for p in ("/p/2?b=2&a=1", "/p/2?a=1&b=2", "/p/2", "/")]
    assert fetch_counts(log) == Counter(
        {"http://127.0.3.1:8000/p/2?a=1&b=2": 2, "http://127.0.3.1:8000/p/2": 1,
         "http://127.0.3.1:8000/": 1}
    )  # fmt: skip


def test_serves_distinct_hosts_and_logs(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=3)
    assert web.seeds == [web.base_url(1), web.base_url(2)]
    before = time.time()
    bodies = [get(url)[1].decode() for url in web.seeds]
    after = time.time()
    assert "<title>Host 1 page 0</title>" in bodies[0]
    assert "<title>Host 2 page 0</title>" in bodies[1]
    assert len(bodies[0]) > 2048  # filler makes pages realistic in size
    assert [r.host_ip for r in web.log] == ["127.0.3.1", "127.0.3.2"]
    for r in web.log:
        assert before <= r.start <= r.end <= after
        assert (r.method, r.path, r.status, r.port) == ("GET", "/", 200, web.port)
        assert r.headers["host"] == f"{r.host_ip}:{web.port}"
        assert (r.body_len, r.body_sha1) == (0, hashlib.sha1(b"").hexdigest())


def test_not_found(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=1, pages=3)
    base = web.base_url(1)
    for path in ("robots.txt", "p/0", "p/3", "p/01", "nope", "p/x"):
        assert get(base + path)[0] == 404, path
    assert get(base + "p/2?x=1")[0] == 200  # the query is ignored when routing


def test_latency_applies(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=2, latency_ms=(150, 150))
    assert web.latency == {"127.0.3.1": 0.15, "127.0.3.2": 0.15}
    t0 = time.monotonic()
    assert get(web.base_url(2))[0] == 200
    assert time.monotonic() - t0 >= 0.15
    assert web.log[0].end - web.log[0].start >= 0.15


def test_latency_per_host_is_fixed_and_in_range() -> None:
    web = TestWeb(hosts=50, pages=2, latency_ms=(10, 80), seed=3)
    assert all(0.010 <= s <= 0.080 for s in web.latency.values())
    assert len(set(web.latency.values())) == 50
    assert TestWeb(hosts=50, pages=2, latency_ms=(10, 80), seed=3).latency == web.latency


def test_politeness_report_on_real_overlapping_requests(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=4, latency_ms=(300, 300))
    barrier = threading.Barrier(4)

    def fetch(path: str) -> None:
        barrier.wait()
        get(web.base_url(1) + path)

    threads = [threading.Thread(target=fetch, args=(f"p/{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for _ in range(3):  # one at a time on host 2
        get(web.base_url(2))
    report = politeness_report(web.log, delay=0.5)
    h1, h2 = report["127.0.3.1"], report["127.0.3.2"]
    assert (h1.requests, h1.max_in_flight, h1.gaps_below_delay) == (4, 4, 3)
    assert h1.min_idle is not None and h1.min_idle < 0  # overlapping fetches
    assert (h2.requests, h2.max_in_flight, h2.gaps_below_delay) == (3, 1, 2)
    assert h2.min_gap is not None and h2.min_gap >= 0.3
    assert h2.min_idle is not None and h2.min_idle >= 0


def test_expected_urls_are_exactly_what_a_bfs_reaches(testweb_factory: WebFactory) -> None:
    web = testweb_factory(
        hosts=3, pages=12, links=4, cross_links=1, links_out_of_scope=1, query_variants=2
    )
    in_scope = {f"{ip}:{web.port}" for ip in web.ips}
    assert len(web.expected_urls) == 3 * (12 + 2)
    seen, queue = set(web.seeds), deque(web.seeds)
    hrefs: list[str] = []
    out_of_scope: set[str] = set()
    dup_on_a_page = False
    while queue:
        url = queue.popleft()
        status, body = get(url)
        assert status == 200, url
        page_hrefs = [html.unescape(h) for h in HREF.findall(body.decode())]
        dup_on_a_page |= len(set(page_hrefs)) < len(page_hrefs)
        hrefs += page_hrefs
        for href in page_hrefs:
            link = canonical_url(urljoin(url, href))
            if urlsplit(link).netloc not in in_scope:
                out_of_scope.add(link)
            elif link not in seen:
                seen.add(link)
                queue.append(link)
    assert seen == web.expected_urls
    assert set(fetch_counts(web.log).values()) == {1}
    assert {urlsplit(u).hostname for u in out_of_scope} == {OUT_OF_SCOPE_IP}
    assert not [r for r in web.log if r.host_ip == OUT_OF_SCOPE_IP]
    # The link forms a crawler must cope with all occur.
    assert dup_on_a_page
    assert any(h.startswith("../") for h in hrefs)
    assert any(h.startswith("//") for h in hrefs)
    assert any(h.startswith("/p/") for h in hrefs)
    assert any("#" in h for h in hrefs)
    assert any(h.endswith("?b=2&a=1") for h in hrefs)
    assert any(h.endswith("?a=1&b=2") for h in hrefs)


def test_every_page_reachable_within_its_host() -> None:
    web = TestWeb(hosts=4, pages=20, links=1, cross_links=0, query_variants=0, seed=9)
    for h in range(1, 5):
        seen, todo = {0}, [0]
        while todo:
            for link in web.graph[h, todo.pop()]:
                assert link.host == h
                if link.page not in seen:
                    seen.add(link.page)
                    todo.append(link.page)
        assert seen == set(range(20))


def test_graph_and_pages_are_deterministic() -> None:
    a, b = TestWeb(hosts=5, pages=8, seed=4), TestWeb(hosts=5, pages=8, seed=4)
    assert a.graph == b.graph and a.render(3, 5) == b.render(3, 5)
    assert TestWeb(hosts=5, pages=8, seed=5).graph != a.graph
    assert a.render(3, 5) != a.render(3, 6)  # filler differs page to page


def test_echo_round_trips_method_headers_and_body(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=1, pages=1)
    body = bytes(range(256)) * 3
    req = urllib.request.Request(
        web.base_url(1) + "echo?q=1", data=body, method="PUT", headers={"X-Token": "abc"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        echo = json.loads(resp.read())
    assert echo["method"] == "PUT"
    assert echo["headers"]["x-token"] == "abc"
    assert base64.b64decode(echo["body_b64"]) == body
    (r,) = web.log
    assert (r.path, r.body_len, r.body_sha1) == ("/echo?q=1", 768, hashlib.sha1(body).hexdigest())


def test_keep_alive_and_chunked_body(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=1, pages=2)
    conn = http.client.HTTPConnection(host_ip(1), web.port, timeout=10)
    for path in ("/", "/p/1"):
        conn.request("GET", path)
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Connection") == "keep-alive"
        resp.read()
    conn.request("POST", "/echo", body=iter([b"ab", b"cd"]), encode_chunked=True)
    assert base64.b64decode(json.loads(conn.getresponse().read())["body_b64"]) == b"abcd"
    sock = conn.sock
    conn.close()
    assert sock is None or sock.fileno() == -1
    assert [r.path for r in web.log] == ["/", "/p/1", "/echo"]


def test_stop_closes_idle_keep_alive_connections() -> None:
    web = TestWeb(hosts=1, pages=1).start()
    conn = http.client.HTTPConnection(host_ip(1), web.port, timeout=10)
    conn.request("GET", "/")
    conn.getresponse().read()
    t0 = time.monotonic()
    web.stop()
    assert time.monotonic() - t0 < 5
    conn.close()


def test_process_mode(tmp_path: Path) -> None:
    options = {"hosts": 2, "pages": 3, "latency_ms": (5, 10), "links_out_of_scope": 1}
    with WebProcess(tmp_path, options) as web:
        assert len(web.seeds) == 2 and len(web.expected_urls) == 2 * (3 + 1)
        ready = json.loads((tmp_path / "testweb-ready.json").read_text())
        assert ready["port"] == web.port and ready["out_of_scope"] == [OUT_OF_SCOPE_IP]
        for url in web.seeds:
            assert get(url)[0] == 200
        assert get(f"http://{OUT_OF_SCOPE_IP}:{web.port}/")[0] == 404  # the trap logs it
    log = web.stop()  # already stopped: reads the log again
    assert [(r.host_ip, r.path) for r in log] == [
        ("127.0.3.1", "/"), ("127.0.3.2", "/"), (OUT_OF_SCOPE_IP, "/"),
    ]  # fmt: skip
    assert all(r.end - r.start >= 0.004 for r in log[:2])


def test_scrapy_link_extractor_and_project_canonicalizer_agree() -> None:
    """The graph's hrefs mean to Scrapy, and canonical_url to the frontier, what they mean here."""
    from scrapy.http import HtmlResponse
    from scrapy.linkextractors import LinkExtractor

    from crawlproject.default_settings import CRAWL_SESSION_PARAMS
    from crawlproject.frontier.basics.urls import UrlCanonicalizer

    web = TestWeb(hosts=3, pages=10, links_out_of_scope=1, query_variants=2, port=8123)
    project = UrlCanonicalizer(CRAWL_SESSION_PARAMS)
    extractor = LinkExtractor()
    for (h, k), links in web.graph.items():
        url = f"http://{host_ip(h)}:8123{'/' if k == 0 else f'/p/{k}'}"
        response = HtmlResponse(url, body=web.render(h, k), encoding="utf-8")
        extracted = [link.url for link in extractor.extract_links(response)]
        assert {canonical_url(u) for u in extracted} == {
            canonical_url(urljoin(url, web.href(link))) for link in links
        }
        assert all(project.canonicalize(u) == canonical_url(u) for u in extracted)
    assert all(project.canonicalize(u) == u for u in web.expected_urls)


# -- special routes ---------------------------------------------------------------------


def raw_get(
    web: TestWeb | WebProcess, h: int, path: str, headers: dict[str, str] | None = None
) -> tuple[http.client.HTTPResponse, bytes]:
    """GET without urllib's redirect following or error mapping."""
    conn = http.client.HTTPConnection(host_ip(h), web.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp, resp.read()
    finally:
        conn.close()


def test_special_status_with_empty_body(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=2, special={1: {"/robots.txt": {"status": 503}}})
    resp, body = raw_get(web, 1, "/robots.txt")
    assert (resp.status, resp.reason, body) == (503, "Service Unavailable", b"")
    assert resp.getheader("Content-Type") == "text/plain"
    assert resp.getheader("Content-Length") == "0"
    assert raw_get(web, 2, "/robots.txt")[0].status == 404  # only host 1 has it
    assert raw_get(web, 1, "/robots.txt?x=1")[0].status == 503  # the query is not routed on
    assert [(r.host_ip, r.path, r.status) for r in web.log] == [
        ("127.0.3.1", "/robots.txt", 503), ("127.0.3.2", "/robots.txt", 404),
        ("127.0.3.1", "/robots.txt?x=1", 503),
    ]  # fmt: skip


def test_special_times_answers_429_once_then_the_page(testweb_factory: WebFactory) -> None:
    spec = {"status": 429, "body": "slow down\n", "headers": {"Retry-After": "2"}, "times": 1}
    web = testweb_factory(hosts=2, pages=3, special={1: {"/p/1": spec}})
    assert raw_get(web, 2, "/p/1")[0].status == 200  # counted per host: host 2 has no spec
    resp, body = raw_get(web, 1, "/p/1")
    assert (resp.status, resp.reason, body) == (429, "Too Many Requests", b"slow down\n")
    assert resp.getheader("Retry-After") == "2"
    resp, body = raw_get(web, 1, "/p/1")
    assert resp.status == 200 and resp.getheader("Retry-After") is None
    assert body == web.render(1, 1)
    assert get(web.base_url(1) + "p/1")[0] == 200
    assert [r.status for r in web.log] == [200, 429, 200, 200]


def test_special_base_placeholder_in_body_and_headers(testweb_factory: WebFactory) -> None:
    robots = "User-agent: *\nDisallow: /p/2\nSitemap: {base}/sitemap_index.xml\n"
    special = {
        2: {
            "/robots.txt": {"body": robots},
            "/old": {"status": 301, "headers": {"Location": "{base}/p/1", "X-Raw": "{x}"}},
        }
    }
    web = testweb_factory(hosts=2, pages=3, special=special)
    base = f"http://{host_ip(2)}:{web.port}"
    assert web.port and web.base_url(2) == base + "/"
    status, body = get(base + "/robots.txt")
    assert status == 200
    assert body.decode() == f"User-agent: *\nDisallow: /p/2\nSitemap: {base}/sitemap_index.xml\n"
    resp, body = raw_get(web, 2, "/old")
    assert (resp.status, resp.reason, body) == (301, "Moved Permanently", b"")
    assert resp.getheader("Location") == f"{base}/p/1"
    assert resp.getheader("X-Raw") == "{x}"  # only {base} is a placeholder
    with urllib.request.urlopen(base + "/old", timeout=10) as followed:  # the target serves
        assert followed.url == f"{base}/p/1" and b"Host 2 page 1" in followed.read()


def test_special_gzip_body_is_a_file_not_an_encoding(testweb_factory: WebFactory) -> None:
    text = '<?xml version="1.0"?>\n<urlset><url><loc>{base}/p/1</loc></url></urlset>\n'
    spec = {"body": text, "gzip": True, "content_type": "application/x-gzip"}
    web = testweb_factory(hosts=1, pages=2, special={1: {"/sitemap.xml.gz": spec}})
    resp, body = raw_get(web, 1, "/sitemap.xml.gz")
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "application/x-gzip"
    assert resp.getheader("Content-Encoding") is None
    assert body[:2] == b"\x1f\x8b"
    base = f"http://{host_ip(1)}:{web.port}"
    assert gzip.decompress(body).decode() == text.replace("{base}", base)
    assert web.log[0].status == 200


def test_special_reset_aborts_the_connection_and_logs(testweb_factory: WebFactory) -> None:
    web = testweb_factory(
        hosts=1, pages=2, special={1: {"/robots.txt": {"reset": True, "times": 1}}}
    )
    with socket.create_connection((host_ip(1), web.port), timeout=10) as sock:
        sock.sendall(f"GET /robots.txt HTTP/1.1\r\nHost: {host_ip(1)}:{web.port}\r\n\r\n".encode())
        with pytest.raises(ConnectionResetError):
            sock.recv(65536)  # an RST, not a clean EOF (b"") nor any response bytes
    (r,) = web.log
    assert (r.host_ip, r.path, r.status, r.method) == (host_ip(1), "/robots.txt", 0, "GET")
    # http.client sees the same; after `times` the normal route (404) answers again.
    web2 = testweb_factory(hosts=1, pages=2, special={1: {"/p/1": {"reset": True, "times": 1}}})
    conn = http.client.HTTPConnection(host_ip(1), web2.port, timeout=10)
    conn.request("GET", "/p/1")
    with pytest.raises(ConnectionResetError):
        conn.getresponse()
    conn.close()
    assert raw_get(web2, 1, "/p/1")[0].status == 200
    assert raw_get(web, 1, "/robots.txt")[0].status == 404
    assert [r.status for r in web2.log] == [0, 200]


def test_special_html_is_not_part_of_the_graph(testweb_factory: WebFactory) -> None:
    spec = {"body": '<html><a href="/p/1">x</a></html>', "content_type": "text/html"}
    web = testweb_factory(hosts=1, pages=2, special={1: {"/extra.html": spec, "/p/1": {}}})
    assert f"http://{host_ip(1)}:{web.port}/extra.html" not in web.expected_urls
    resp, body = raw_get(web, 1, "/extra.html")
    assert resp.getheader("Content-Type") == "text/html" and body == spec["body"].encode()
    resp, body = raw_get(web, 1, "/p/1")  # an empty spec overrides a page: 200, empty text
    assert (resp.status, resp.getheader("Content-Type"), body) == (200, "text/plain", b"")
    assert web.expected_urls == TestWeb(hosts=1, pages=2, port=web.port).expected_urls


def test_special_is_validated() -> None:
    bads: list[dict[int, dict[str, dict[str, Any]]]] = [
        {0: {"/robots.txt": {}}},
        {3: {"/robots.txt": {}}},
        {1: {"robots.txt": {}}},
        {1: {"/robots.txt?x=1": {}}},
        {1: {"/robots.txt": {"statuss": 200}}},
    ]
    for bad in bads:
        with pytest.raises(ValueError):
            TestWeb(hosts=2, pages=1, special=bad)
    headers = {"Retry-After": "2"}
    spec: dict[str, Any] = {"status": 429, "headers": headers}
    web = TestWeb(hosts=2, pages=1, special={2: {"/p": spec}})
    headers["Retry-After"] = "9"  # the web keeps its own copy
    assert web.params["special"] == {2: {"/p": {"status": 429, "headers": {"Retry-After": "2"}}}}


# -- reachable_urls ---------------------------------------------------------------------


def test_reachable_urls_on_a_hand_made_chain() -> None:
    web = TestWeb(hosts=2, pages=5, links=1, cross_links=0, query_variants=0, port=9)
    # links=1: each page links only to the next, so each host is the chain / -> 1 -> .. -> 4 -> /.
    assert all(
        [(link.host, link.page) for link in web.graph[h, k]] == [(h, (k + 1) % 5)]
        for h, k in web.graph
    )
    b1, b2 = "http://127.0.3.1:9", "http://127.0.3.2:9"
    everything = {b + p for b in (b1, b2) for p in ("/", "/p/1", "/p/2", "/p/3", "/p/4")}
    assert web.reachable_urls(lambda u: True) == web.expected_urls == everything
    # Forbidding host 1's /p/2 cuts off /p/3 and /p/4 behind it; host 2 is untouched.
    no_p2 = web.reachable_urls(lambda u: u != b1 + "/p/2")
    assert no_p2 == {b1 + "/", b1 + "/p/1"} | {u for u in everything if u.startswith(b2)}
    # A forbidden seed loses its whole host.
    assert web.reachable_urls(lambda u: u != b2 + "/") == {
        u for u in everything if u.startswith(b1)
    }
    # Another way in keeps a successor: / -> /p/3 as well, so only /p/2 is lost.
    web.graph[1, 0] = [*web.graph[1, 0], Link(1, 3, "root")]
    assert web.reachable_urls(lambda u: u != b1 + "/p/2") == everything - {b1 + "/p/2"}
    assert web.reachable_urls(lambda u: False) == set()


def crawl_over_http(web: TestWeb, allowed: Callable[[str], bool]) -> set[str]:
    """What a crawler that never fetches a URL ``allowed`` rejects fetches."""
    in_scope = {f"{ip}:{web.port}" for ip in web.ips}
    start = [u for u in map(canonical_url, web.seeds) if allowed(u)]
    seen, queue = set(start), deque(start)
    while queue:
        url = queue.popleft()
        status, body = get(url)
        assert status == 200, url
        for href in HREF.findall(body.decode()):
            link = canonical_url(urljoin(url, html.unescape(href)))
            if urlsplit(link).netloc in in_scope and link not in seen and allowed(link):
                seen.add(link)
                queue.append(link)
    return seen


def test_reachable_urls_agrees_with_a_crawl_over_http(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=3, pages=12, links=2, cross_links=1, query_variants=2, seed=7)
    calls: list[str] = []

    def allowed(url: str) -> bool:
        calls.append(url)
        parts = urlsplit(url)
        # No /p/1 anywhere, no host 3 seed, and no query variants.
        return parts.path != "/p/1" and url != web.base_url(3) and not parts.query

    reachable = web.reachable_urls(allowed)
    assert all(canonical_url(u) == u for u in calls)  # the predicate sees canonical URLs
    assert any(u.endswith("?a=1&b=2") for u in calls)
    assert not any(u.endswith("?b=2&a=1") for u in calls)
    assert reachable == crawl_over_http(web, allowed)
    assert reachable < {u for u in web.expected_urls if allowed(u)}  # some pages were cut off
    assert (
        web.expected_urls
        == web.reachable_urls(lambda u: True)
        == crawl_over_http(web, lambda u: True)
    )


def test_process_mode_with_special_file(tmp_path: Path) -> None:
    special = {
        "1": {"/robots.txt": {"body": "Sitemap: {base}/sitemap.xml\n"}},
        "2": {"/p/1": {"status": 429, "times": 1, "headers": {"Retry-After": "1"}}},
    }
    special_file = tmp_path / "special.json"
    special_file.write_text(json.dumps(special))
    options = {"hosts": 2, "pages": 3, "links": 2, "special": str(special_file)}
    with WebProcess(tmp_path / "web", options) as web:
        assert web.description["params"]["special"] == special
        status, body = get(f"http://{host_ip(1)}:{web.port}/robots.txt")
        assert (status, body) == (
            200,
            f"Sitemap: http://{host_ip(1)}:{web.port}/sitemap.xml\n".encode(),
        )
        assert get(f"http://{host_ip(2)}:{web.port}/p/1")[0] == 429
        assert get(f"http://{host_ip(2)}:{web.port}/p/1")[0] == 200
        # reachable_urls from the description: the graph rebuilt in this process.
        same = TestWeb(hosts=2, pages=3, links=2, port=web.port)
        assert web.reachable_urls(lambda u: True) == web.expected_urls == same.expected_urls
        forbid = f"http://{host_ip(1)}:{web.port}/p/1"
        assert web.reachable_urls(lambda u: u != forbid) == same.reachable_urls(
            lambda u: u != forbid
        )
    assert [(r.host_ip, r.path, r.status) for r in web.stop()] == [
        (host_ip(1), "/robots.txt", 200), (host_ip(2), "/p/1", 429), (host_ip(2), "/p/1", 200),
    ]  # fmt: skip
    # A dict option is handed over as a JSON file.
    options = {"hosts": 1, "pages": 1, "special": {1: {"/x": {"status": 500}}}}
    with WebProcess(tmp_path / "web2", options) as web2:
        assert web2.description["params"]["special"] == {"1": {"/x": {"status": 500}}}
        assert get(f"http://{host_ip(1)}:{web2.port}/x")[0] == 500


# -- realistic pages and mirrors ----------------------------------------------------------

TAG = re.compile(r"<[^>]+>")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def block(page: str, tag: str) -> str:
    found = re.search(rf"<{tag}\b.*?</{tag}>", page, re.S)
    assert found, tag
    return found.group(0)


def visible_words(page: str) -> list[str]:
    return html.unescape(TAG.sub(" ", page)).split()


def page_of(url: str) -> int:
    path = urlsplit(url).path
    return 0 if path == "/" else int(path.removeprefix("/p/"))


def test_realistic_pages_share_a_template_and_differ_in_body(testweb_factory: WebFactory) -> None:
    params: dict[str, Any] = dict(
        hosts=2, pages=6, links_out_of_scope=1, query_variants=2, body_bytes=3000, seed=3
    )
    web = testweb_factory(realistic=True, **params)
    pages = {
        (h, k): get(web.base_url(h) + page_path(k)[1:])[1].decode()
        for h in (1, 2)
        for k in range(6)
    }
    a, b = pages[1, 0], pages[1, 3]
    site = web.site(1)
    assert site.name != web.site(2).name and len(site.nav) == 10
    # The template: header (site name, nav), About box and footer, shared but for the date.
    assert block(a, "header") == block(b, "header")
    assert site.name in block(a, "header") and f"| {site.name}</title>" in a
    assert block(a, "aside") == block(b, "aside")
    assert DATE.sub("D", block(a, "footer")) == DATE.sub("D", block(b, "footer"))
    assert block(a, "footer") != block(b, "footer")
    assert f"Last updated: {web.last_updated(1, 3)}</p>" in b
    assert "\u00a9" in b and "All rights reserved." in b
    shared = " ".join(visible_words(block(b, "header") + block(b, "aside") + block(b, "footer")))
    assert 1000 <= len(shared) <= 1500
    assert 300 <= len(" ".join(visible_words(block(b, "footer")))) <= 600
    assert block(a, "header") != block(pages[2, 0], "header")  # another host, another site
    # Bodies: different pages, different paragraphs of English sentences.
    paragraphs = {
        key: re.findall(r"<p>([^<]*)</p>", block(page, "article")) for key, page in pages.items()
    }
    assert not set(paragraphs[1, 0]) & set(paragraphs[1, 3])
    assert f"<h1>{html.escape(web.headline(1, 3))}</h1>" in b
    for paras in paragraphs.values():
        assert 3000 <= sum(len(p) + 1 for p in paras) <= 3400
        words = " ".join(paras).lower().split()
        share = sum(w.strip(",.?!") in ENGLISH_WORDS for w in words) / len(words)
        assert 0.75 <= share <= 0.95, share  # ~15 % topic terms
        for para in paras:
            sentences = re.split(r"(?<=[.?!]) ", para)
            assert 1 <= len(sentences) <= 6
            for sentence in sentences:
                assert (sentence[0].isupper() or sentence[0].isdigit()) and sentence[-1] in ".?!"
                words = sentence.lower().split()
                assert 8 <= len(words) <= 20
                # Common English words, and some of the page's own topic terms.
                english = sum(w.strip(",.?!") in ENGLISH_WORDS for w in words)
                assert english >= len(words) // 2
    # Links: exactly the graph's, in its forms, and the same graph as a plain web's.
    for (h, k), page in pages.items():
        hrefs = [html.unescape(href) for href in HREF.findall(page)]
        assert hrefs == [web.href(link) for link in web.graph[h, k]]
    plain = TestWeb(port=web.port, **params)
    assert plain.graph == web.graph and plain.expected_urls == web.expected_urls
    assert crawl_over_http(web, lambda u: True) == web.expected_urls
    # Deterministic given the parameters; another seed, another web.
    again = TestWeb(realistic=True, port=web.port, **params)
    assert all(again.render(h, k).decode() == page for (h, k), page in pages.items())
    other = TestWeb(realistic=True, port=web.port, **{**params, "seed": 4})
    assert other.render(1, 3) != again.render(1, 3)
    assert other.site(1) != again.site(1)


def test_mirror_pages_equal_their_source_but_banner_and_date(testweb_factory: WebFactory) -> None:
    params: dict[str, Any] = dict(hosts=4, pages=5, links_out_of_scope=1, query_variants=2)
    web = testweb_factory(realistic=True, mirrors={3: 1, 4: 1}, **params)
    src_ip = host_ip(1)
    pairs = web.mirror_pairs()
    # Every URL of a mirror (query variants too) is paired with its source's, both expected.
    for m in (3, 4):
        mirror_urls = {u for u in web.expected_urls if urlsplit(u).hostname == host_ip(m)}
        assert {mu for mu, _ in pairs if urlsplit(mu).hostname == host_ip(m)} == mirror_urls
        assert len(mirror_urls) == 5 + 2
    assert len(pairs) == len(set(pairs)) == 2 * (5 + 2)
    assert all(urlsplit(su).hostname == src_ip for _, su in pairs)
    assert {su for _, su in pairs} <= web.expected_urls
    assert all(
        urlsplit(mu)._replace(netloc="") == urlsplit(su)._replace(netloc="") for mu, su in pairs
    )
    banners: dict[str, set[str]] = {host_ip(3): set(), host_ip(4): set()}
    for mirror_url, source_url in pairs:
        (m_status, m_body), (s_status, s_body) = get(mirror_url), get(source_url)
        assert m_status == s_status == 200
        mirror, source = m_body.decode(), s_body.decode()
        m, k = (3 if urlsplit(mirror_url).hostname == host_ip(3) else 4), page_of(mirror_url)
        banner = web.banner(m)
        assert f'<div class="banner">{html.escape(banner)}</div>' in mirror
        assert '<div class="banner">' not in source
        banners[host_ip(m)] |= set(re.findall(r'<div class="banner">([^<]*)</div>', mirror))
        # Visible text: the same words but for the banner and the "Last updated" date.
        s_words, m_words = visible_words(source), visible_words(mirror)
        diff = difflib.SequenceMatcher(None, s_words, m_words, autojunk=False).get_opcodes()
        changes = [(tag, s_words[i:j], m_words[p:q]) for tag, i, j, p, q in diff if tag != "equal"]
        assert changes == [
            ("insert", [], banner.split()),
            ("replace", [web.last_updated(1, k)], [web.last_updated(m, k)]),
        ]
        assert 15 <= len(banner.split()) <= 25
        assert web.last_updated(1, k) != web.last_updated(m, k)
        # Links: the source's, with its own host replaced by the mirror's.
        s_links = [
            canonical_url(urljoin(source_url, html.unescape(h))) for h in HREF.findall(source)
        ]
        m_links = [
            canonical_url(urljoin(mirror_url, html.unescape(h))) for h in HREF.findall(mirror)
        ]
        assert m_links == [u.replace(f"//{src_ip}:", f"//{host_ip(m)}:") for u in s_links]
        assert any(urlsplit(u).hostname == host_ip(m) for u in m_links)
        assert not any(urlsplit(u).hostname == src_ip for u in m_links)
    assert {ip: len(texts) for ip, texts in banners.items()} == {host_ip(3): 1, host_ip(4): 1}
    assert banners[host_ip(3)] != banners[host_ip(4)]
    # Adding mirrors leaves the other hosts' graphs as they were, and their pages too but for
    # the text of links into a mirror (a mirror's page has its source's title).
    plain = TestWeb(realistic=True, port=web.port, **params)
    for h in (1, 2):
        for k in range(5):
            assert web.graph[h, k] == plain.graph[h, k]
            if not any(link.host in (3, 4) for link in web.graph[h, k]):
                assert web.render(h, k) == plain.render(h, k)
    assert crawl_over_http(web, lambda u: True) == web.expected_urls


def test_plain_mirror_pages_copy_the_source_and_add_the_banner() -> None:
    web = TestWeb(hosts=2, pages=3, query_variants=0, mirrors={2: 1}, port=9)
    source, mirror = web.render(1, 1).decode(), web.render(2, 1).decode()
    assert "<title>Host 1 page 1</title>" in mirror
    banner = f'<div class="banner">{html.escape(web.banner(2))}</div>\n'
    # Links to host 1 become links to host 2; any to host 2 stay.
    assert mirror.replace(banner, "") == source.replace(f"//{host_ip(1)}:", f"//{host_ip(2)}:")
    assert web.mirror_pairs() == [
        ("http://127.0.3.2:9/", "http://127.0.3.1:9/"),
        ("http://127.0.3.2:9/p/1", "http://127.0.3.1:9/p/1"),
        ("http://127.0.3.2:9/p/2", "http://127.0.3.1:9/p/2"),
    ]


def test_mirrors_are_validated_and_described() -> None:
    bads: list[dict[Any, Any]] = [
        {1: 1},  # itself
        {0: 1},
        {4: 1},  # out of range
        {2: 0},
        {2: 4},
        {2: 1, 3: 2},  # a mirror of a mirror
        {2: 1, 1: 3},  # a source that is also a mirror
        {"2": 1},
    ]
    for bad in bads:
        with pytest.raises(ValueError):
            TestWeb(hosts=3, pages=1, mirrors=bad)
    plain = TestWeb(hosts=2, pages=1)
    assert (plain.params["realistic"], plain.params["mirrors"], plain.mirror_pairs()) == (
        False, {}, [],
    )  # fmt: skip
    mirrors = {3: 1}
    web = TestWeb(hosts=3, pages=2, realistic=True, mirrors=mirrors, port=9)
    mirrors[2] = 1  # the web keeps its own copy
    assert (web.params["realistic"], web.params["mirrors"]) == (True, {3: 1})
    description = json.loads(json.dumps(web.describe()))
    assert description["params"]["realistic"] is True
    assert description["params"]["mirrors"] == {"3": 1}
    assert [tuple(p) for p in description["mirror_pairs"]] == web.mirror_pairs()
    rebuilt = web_from_description(description)
    assert rebuilt.mirrors == {3: 1} and rebuilt.realistic
    assert rebuilt.graph == web.graph and rebuilt.render(3, 1) == web.render(3, 1)


def test_process_mode_with_mirrors_and_realistic(tmp_path: Path) -> None:
    options: dict[str, Any] = {"hosts": 3, "pages": 4, "realistic": True, "mirrors": {3: 2}}
    with WebProcess(tmp_path / "web", options) as web:
        params = web.description["params"]
        assert (params["realistic"], params["mirrors"]) == (True, {"3": 2})
        same = TestWeb(hosts=3, pages=4, realistic=True, mirrors={3: 2}, port=web.port)
        assert web.expected_urls == same.expected_urls == web.reachable_urls(lambda u: True)
        assert web.mirror_pairs() == same.mirror_pairs()
        for mirror_url, source_url in web.mirror_pairs():
            k = page_of(mirror_url)
            assert get(mirror_url) == (200, same.render(3, k))
            assert get(source_url) == (200, same.render(2, k))
        assert (
            f'<div class="banner">{html.escape(same.banner(3))}</div>'.encode()
            in get(web.seeds[2])[1]
        )
    # Inline JSON works as well as a file; realistic=False passes no flag.
    options = {"hosts": 2, "pages": 2, "realistic": False, "mirrors": '{"2": 1}'}
    with WebProcess(tmp_path / "web2", options) as web2:
        params = web2.description["params"]
        assert (params["realistic"], params["mirrors"]) == (False, {"2": 1})
        same = TestWeb(hosts=2, pages=2, mirrors={2: 1}, port=web2.port)
        assert get(web2.seeds[1]) == (200, same.render(2, 0))
    with pytest.raises(RuntimeError, match="cannot mirror itself"):
        WebProcess(tmp_path / "web3", {"hosts": 2, "mirrors": {2: 2}}).start()


# -- unbalanced sites, spider traps, a popular page ---------------------------------------


def web_digest(web: TestWeb) -> str:
    """SHA-256 over the graph, every page's bytes, expected_urls, variants, latencies and
    mirror pairs."""
    digest = hashlib.sha256()
    for key in sorted(web.graph):
        digest.update(repr((key, web.graph[key])).encode())
        digest.update(web.render(*key))
    for part in (sorted(web.expected_urls), web.variants, web.latency, web.mirror_pairs()):
        digest.update(json.dumps(part, sort_keys=True).encode())
    return digest.hexdigest()


def test_webs_without_the_new_options_are_unchanged() -> None:
    # Digests computed with web_digest on the code before host_pages, traps and popular were
    # added (testkit/testweb.py at commit c429b16), for these very parameters.
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "e0d75eeccb82f9eaebe8fe5271b830b1f48cf88fb1adf830233d193343f0e98a"),
        (
            dict(hosts=4, pages=7, latency_ms=(10, 80), links_out_of_scope=1, query_variants=2,
                 seed=5),
            "b522a151e695584f9cd294dff402bc53bf0e8ee2a4cbbaee1e0788281dfa45c7",
        ),
        (
            dict(hosts=3, pages=5, realistic=True, mirrors={3: 1}),
            "e6ef04ec65f7334651bad0312e9c6a8b0458fbf8c1df5fc54b734465daeda3e1",
        ),
    ]  # fmt: skip
    for params, digest in cases:
        assert web_digest(TestWeb(port=8000, **params)) == digest, params
    empty = TestWeb(port=8000, host_pages={}, traps={}, popular=None)
    assert web_digest(empty) == cases[0][1]
    assert (empty.params["host_pages"], empty.params["traps"], empty.params["popular"]) == (
        {}, {}, None,
    )  # fmt: skip
    description = empty.describe()
    assert (description["trap_hosts"], description["popular_url"]) == ({}, None)


def links_of(url: str, body: bytes) -> list[str]:
    """The page's links, absolute and canonical, in page order."""
    return [canonical_url(urljoin(url, html.unescape(h))) for h in HREF.findall(body.decode())]


def depths(web: TestWeb, h: int) -> dict[int, int]:
    """BFS depth from / of every page of host h, over its own links in the graph."""
    depth, queue = {0: 0}, deque([0])
    while queue:
        k = queue.popleft()
        for link in web.graph[h, k]:
            if link.host == h and link.page not in depth:
                depth[link.page] = depth[k] + 1
                queue.append(link.page)
    return depth


def tree_depth(k: int) -> int:
    """The docstring's d(k): the least d with k < (10^(d+1) - 1) / 9."""
    d = 0
    while k >= (10 ** (d + 1) - 1) // 9:
        d += 1
    return d


def test_host_pages_big_host_every_page_within_four_links() -> None:
    plain = TestWeb(hosts=21, pages=10, port=9)
    web = TestWeb(hosts=21, pages=10, host_pages={1: 2000}, port=9)
    assert web.page_count(1) == 2000 and web.page_count(2) == 10
    assert {k for h, k in web.graph if h == 1} == set(range(2000))
    depth = depths(web, 1)
    assert set(depth) == set(range(2000))
    assert max(depth.values()) <= 4
    assert all(depth[k] <= tree_depth(k) for k in depth)
    assert [tree_depth(k) for k in (0, 1, 10, 11, 110, 111, 1110, 1111, 1999)] == [
        0, 1, 1, 2, 2, 3, 3, 4, 4,
    ]  # fmt: skip
    # Index links: page k ends with links to 10k+1 .. 10k+10 (those that exist).
    assert web.graph[1, 0][-10:] == [Link(1, c, "root") for c in range(1, 11)]
    assert web.graph[1, 199][-9:] == [Link(1, c, "root") for c in range(1991, 2000)]
    assert web.graph[1, 199][-10] != Link(1, 1990, "root")
    assert not any(link.page > 1999 for link in web.graph[1, 199])
    # The chain is still there; the other hosts' graphs are untouched.
    assert all(any(link.page == (k + 1) % 2000 for link in web.graph[1, k]) for k in range(2000))
    assert all(web.graph[h, k] == plain.graph[h, k] for h in range(2, 22) for k in range(10))
    per_host = Counter(urlsplit(u).hostname for u in web.expected_urls)
    assert per_host[host_ip(1)] == 2000 + 1  # a query variant too
    assert {per_host[ip] for ip in web.ips[1:]} == {10 + 1}
    # A host with fewer pages than ``pages``: links into it are folded into its range.
    small = TestWeb(hosts=5, pages=10, host_pages={2: 3}, port=9)
    assert {k for h, k in small.graph if h == 2} == {0, 1, 2}
    assert all(link.page < 3 for links in small.graph.values() for link in links if link.host == 2)
    assert len([u for u in small.expected_urls if urlsplit(u).hostname == host_ip(2)]) == 3 + 1


def test_host_pages_over_http(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=3, pages=5, host_pages={1: 300, 3: 2}, query_variants=1)
    base1, base3 = web.base_url(1), web.base_url(3)
    assert get(base1 + "p/299")[0] == 200 and get(base1 + "p/300")[0] == 404
    assert get(base3 + "p/1")[0] == 200 and get(base3 + "p/2")[0] == 404
    status, body = get(base1)
    assert status == 200
    assert {base1 + f"p/{c}" for c in range(1, 11)} <= set(links_of(base1, body))
    assert crawl_over_http(web, lambda u: True) == web.expected_urls
    assert len(web.expected_urls) == (300 + 1) + (5 + 1) + (2 + 1)


def test_host_pages_are_validated_and_rebuilt_from_the_description() -> None:
    for bad in ({0: 5}, {4: 5}, {1: 0}, {1: True}, {True: 5}, {"1": 5}, {2: 5}):
        with pytest.raises(ValueError):
            TestWeb(hosts=3, pages=2, host_pages=bad, mirrors={2: 1})  # type: ignore[arg-type]
    host_pages = {1: 40}
    web = TestWeb(hosts=3, pages=2, host_pages=host_pages, mirrors={3: 1}, port=9)
    host_pages[1] = 50  # the web keeps its own copy
    assert web.params["host_pages"] == {1: 40} and web.page_count(3) == 40  # the mirror's too
    assert len(web.mirror_pairs()) == 40 + 1
    rebuilt = web_from_description(json.loads(json.dumps(web.describe())))
    assert rebuilt.host_pages == {1: 40} and rebuilt.graph == web.graph


def test_calendar_trap_links_to_previous_and_next_month(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=3, traps={2: "calendar"})
    base = web.base_url(2)
    entry = f"{base}calendar?month={CALENDAR_START}"
    assert entry == f"{base}calendar?month=2025-01"
    status, body = get(base)
    assert status == 200 and links_of(base, body)[-1] == entry
    assert entry not in links_of(web.base_url(1), get(web.base_url(1))[1])  # only host 2's /
    url, seen = entry, []
    for _ in range(14):  # forwards, across a year end
        status, body = get(url)
        assert status == 200 and b"<!DOCTYPE html>" in body
        seen.append(urlsplit(url).query)
        prev, nxt, home = links_of(url, body)
        assert (urlsplit(prev).path, home) == ("/calendar", base)
        url = nxt
    assert seen[0] == "month=2025-01" and seen[11:] == [
        "month=2025-12", "month=2026-01", "month=2026-02",
    ]  # fmt: skip
    status, body = get(f"{base}calendar?month=2025-01")
    assert links_of(base + "calendar", body)[0] == f"{base}calendar?month=2024-12"
    assert b'href="?month=2025-02"' in body  # the next month as a query-only relative link
    # Endless forwards; backwards down to 0001-01, which has no previous month.
    far = f"{base}calendar?month=9999-12"
    assert links_of(far, get(far)[1])[0] == f"{base}calendar?month=9999-11"
    assert links_of(far, get(far)[1])[1] == f"{base}calendar?month=10000-01"
    first = f"{base}calendar?month=0001-01"
    assert links_of(first, get(first)[1]) == [f"{base}calendar?month=0001-02", base]
    for bad in (
        "calendar",
        "calendar?month=2025-13",
        "calendar?month=2025-1",
        "calendar?month=0000-05",
        "calendar?m=2025-01",
        "calendar/?month=2025-01",
    ):
        assert get(base + bad)[0] == 404, bad  # fmt: skip
    assert get(base + "calendar?x=1&month=2025-03")[0] == 200  # other pairs are ignored
    assert get(web.base_url(1) + f"calendar?month={CALENDAR_START}")[0] == 404  # no trap
    # Trap URLs are no part of the graph nor of expected_urls.
    assert not any("calendar" in u for u in web.expected_urls)
    assert web.trap_kind(entry) == "calendar" and web.trap_kind(base) is None
    assert web.trap_kind(base + "calendar?month=2025-13") is None
    assert web.expected_urls == TestWeb(hosts=2, pages=3, port=web.port).expected_urls


def sids(url: str, body: bytes) -> set[str]:
    return {urlsplit(u).query for u in links_of(url, body) if urlsplit(u).path.startswith("/s/")}


def test_session_trap_mints_a_session_id_per_render(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=3, traps={1: "session"})
    base = web.base_url(1)
    first, again = get(base)[1], get(base)[1]
    entry = [u for u in links_of(base, first) if "/s/" in u]
    assert [urlsplit(u).path for u in entry] == [f"/s/{j}" for j in range(SESSION_PAGES)]
    assert len(sids(base, first)) == len(sids(base, again)) == 1  # one id per render
    assert sids(base, first) != sids(base, again)
    (sid,) = sids(base, first)
    assert re.fullmatch(r"sid=[0-9a-f]{16}", sid)
    page = f"{base}s/2?{sid}"
    a, b = get(page), get(page)  # the same URL twice: new ids each time
    assert a[0] == b[0] == 200
    assert sids(page, a[1]) != sids(page, b[1])
    assert [urlsplit(u).path for u in links_of(page, a[1])] == [
        *(f"/s/{j}" for j in range(SESSION_PAGES)), "/",
    ]  # fmt: skip
    # The server ignores the id: the page is the same but for the ids in its links.
    (sid_a,), (sid_b,) = sids(page, a[1]), sids(page, b[1])
    assert a[1].replace(sid_a.encode(), b"") == b[1].replace(sid_b.encode(), b"")
    assert get(f"{base}s/2")[1].replace(b"sid=", b"")[:200] == a[1][:200]
    assert get(f"{base}s/2?sid=whatever")[0] == 200
    assert get(f"{base}s/1")[1] != get(f"{base}s/2")[1]  # five distinct pages
    for bad in (f"s/{SESSION_PAGES}", "s/01", "s/", "s/x"):
        assert get(base + bad)[0] == 404, bad
    assert not any("/s/" in u for u in web.expected_urls)
    assert web.trap_kind(page) == web.trap_kind(f"{base}s/0") == "session"
    assert web.trap_kind(f"{base}s/{SESSION_PAGES}") is None


def test_repeat_trap_serves_endless_relative_paths(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=3, traps={2: "repeat"})
    base = web.base_url(2)
    status, body = get(base)
    assert b'href="x/"' in body and links_of(base, body)[-1] == base + "x/"
    url = base + "x/"
    for depth in range(1, 8):
        status, body = get(url)
        assert status == 200 and b"<!DOCTYPE html>" in body
        assert b'href="x/"' in body and b'href="y/x/"' in body
        x, yx, home = links_of(url, body)
        assert (x, yx, home) == (url + "x/", url + "y/x/", base)
        assert urlsplit(url).path == "/x" * depth + "/"
        url = x
    assert get(base + "x/x/x/")[0] == 200
    assert get(base + "x/y/x/y/y/x/")[0] == 200
    for bad in ("x", "x/x", "z/", "x/z/", "x//"):
        assert get(base + bad)[0] == 404, bad
    assert get(web.base_url(1) + "x/")[0] == 404
    assert web.trap_kind(base + "x/x/x/") == "repeat" and web.trap_kind(base + "x") is None
    assert not any("/x/" in u for u in web.expected_urls)


def test_minted_trap_links_to_fresh_urls_that_all_exist(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=3, traps={1: "minted"}, seed=11)
    base = web.base_url(1)
    minted = [u for u in links_of(base, get(base)[1]) if "/m/" in u]
    assert len(minted) == MINTED_LINKS
    seen = set(minted)
    for url in minted[:2]:
        for _ in range(3):  # down the chain: every page mints new, served links
            status, body = get(url)
            assert status == 200 and b"<!DOCTYPE html>" in body
            links = links_of(url, body)
            assert links[-1] == base
            fresh = links[:-1]
            assert len(fresh) == MINTED_LINKS
            assert all(re.fullmatch(r"/m/[0-9a-f]{16}", urlsplit(u).path) for u in fresh)
            assert not seen & set(fresh) and len(set(fresh)) == MINTED_LINKS
            seen |= set(fresh)
            assert web.trap_kind(url) == "minted"
            url = fresh[-1]
    assert get(base + "m/made0up")[0] == 200 and get(base + "m/")[0] == 404
    assert get(base + "m/a/b")[0] == 404
    assert not any("/m/" in u for u in web.expected_urls)
    # Tokens: from the web's own seeded RNG, so the same sequence per seed.
    a, b = TestWeb(hosts=1, pages=1, seed=11), TestWeb(hosts=1, pages=1, seed=11)
    assert [a.token() for _ in range(5)] == [b.token() for _ in range(5)]
    assert a.token() != TestWeb(hosts=1, pages=1, seed=12).token()


def test_trap_pages_are_valid_html_for_scrapy_and_expected_urls_skip_them() -> None:
    from scrapy.http import HtmlResponse
    from scrapy.linkextractors import LinkExtractor

    traps = {1: "calendar", 2: "session", 3: "repeat", 4: "minted"}
    web = TestWeb(hosts=5, pages=4, traps=traps, realistic=True, port=8123)
    extractor = LinkExtractor()
    trap_urls = {
        1: "http://127.0.3.1:8123/calendar?month=2030-06",
        2: "http://127.0.3.2:8123/s/3?sid=abc",
        3: "http://127.0.3.3:8123/x/y/x/",
        4: "http://127.0.3.4:8123/m/abc123",
    }
    for h, url in trap_urls.items():
        parts = urlsplit(url)
        page = web.render_trap(h, parts.path, parts.query)
        assert page is not None and page.startswith(b"<!DOCTYPE html>")
        response = HtmlResponse(url, body=page, encoding="utf-8")
        extracted = [link.url for link in extractor.extract_links(response)]
        assert {canonical_url(u) for u in extracted} == set(links_of(url, page))
        assert web.trap_kind(url) == traps[h]
        # Each trap host's / (a realistic page here) links into its trap.
        home = web.base_url(h)
        response = HtmlResponse(home, body=web.render(h, 0), encoding="utf-8")
        assert any(web.trap_kind(link.url) for link in extractor.extract_links(response))
    assert web.render_trap(5, "/x/") is None and web.trap_kind(web.base_url(5) + "x/") is None
    # The graph is the trap-less web's; a crawl that skips trap URLs fetches expected_urls.
    assert web.graph == TestWeb(hosts=5, pages=4, port=8123).graph
    assert not any(web.trap_kind(u) for u in web.expected_urls)


def test_trap_hosts_keep_their_normal_pages_and_fetches_are_counted(
    testweb_factory: WebFactory,
) -> None:
    traps = {2: "calendar", 3: "session", 4: "repeat", 5: "minted"}
    web = testweb_factory(hosts=5, pages=4, traps=traps)
    assert crawl_over_http(web, lambda u: web.trap_kind(u) is None) == web.expected_urls
    normal = len(web.log)
    assert web.trap_fetches(web.log) == Counter({2: 0, 3: 0, 4: 0, 5: 0})
    # Two trap pages on each trap host, and a robots.txt (counted only on request).
    for h in traps:
        url = next(
            u for u in links_of(web.base_url(h), get(web.base_url(h))[1]) if web.trap_kind(u)
        )
        get(url)
        get(next(u for u in links_of(url, get(url)[1]) if web.trap_kind(u)))
    get(web.base_url(1) + "robots.txt")
    trap_fetches = web.trap_fetches(web.log)
    assert trap_fetches == Counter({2: 3, 3: 3, 4: 3, 5: 3})
    by_host = fetches_by_host(web.log)
    assert sum(by_host.values()) == normal + 4 + 12
    assert by_host[host_ip(1)] == 5 and fetches_by_host(web.log, robots=True)[host_ip(1)] == 6
    assert all(by_host[host_ip(h)] == 5 + 1 + 3 for h in traps)  # + a second fetch of /


def test_popular_page_is_linked_from_every_hosts_root(testweb_factory: WebFactory) -> None:
    params: dict[str, Any] = dict(hosts=6, pages=4, query_variants=1, seed=2)
    web = testweb_factory(popular=(3, "/popular"), **params)
    popular = f"http://{host_ip(3)}:{web.port}/popular"
    assert web.popular_url == popular and popular in web.expected_urls
    assert web.path_of(POPULAR_PAGE) == "/popular"
    for h in range(1, 7):
        base = web.base_url(h)
        assert links_of(base, get(base)[1])[-1] == popular
        assert web.graph[h, 0][-1] == Link(3, POPULAR_PAGE, "root" if h == 3 else "abs")
    status, body = get(popular)
    assert status == 200 and b"<title>Host 3 popular page</title>" in body
    assert links_of(popular, body) == [web.base_url(3)]
    assert get(web.base_url(2) + "popular")[0] == 404  # only on host 3
    assert crawl_over_http(web, lambda u: True) == web.expected_urls
    plain = TestWeb(port=web.port, **params)
    assert web.expected_urls == plain.expected_urls | {popular}
    for (h, k), links in plain.graph.items():
        assert web.graph[h, k] == ([*links, web.graph[h, 0][-1]] if k == 0 else links)
    realistic = TestWeb(port=web.port, realistic=True, popular=(3, "/popular"), **params)
    assert b"/popular" in realistic.render(1, 0) and realistic.render(3, POPULAR_PAGE)
    for bad in ((0, "/x"), (7, "/x"), (1, "x"), (1, "/"), (1, "/p/2"), (1, "/x?y=1"),
                (1, "/echo"), (1, "/go/1"), (1,), 1):  # fmt: skip
        with pytest.raises(ValueError):
            TestWeb(hosts=6, pages=4, popular=bad)  # type: ignore[arg-type]


def test_traps_are_validated() -> None:
    for bad in ({0: "calendar"}, {3: "minted"}, {1: "maze"}, {"1": "repeat"}):
        with pytest.raises(ValueError):
            TestWeb(hosts=2, pages=1, traps=bad)  # type: ignore[arg-type]


def test_process_mode_with_host_pages_traps_and_popular(tmp_path: Path) -> None:
    options: dict[str, Any] = {
        "hosts": 4, "pages": 3, "host_pages": {1: 150}, "traps": {2: "minted", 4: "repeat"},
        "popular": (3, "/hot"),
    }  # fmt: skip
    with WebProcess(tmp_path / "web", options) as web:
        params = web.description["params"]
        assert params["host_pages"] == {"1": 150}
        assert params["traps"] == {"2": "minted", "4": "repeat"}
        assert params["popular"] == [3, "/hot"]
        assert web.description["trap_hosts"] == {host_ip(2): "minted", host_ip(4): "repeat"}
        popular = f"http://{host_ip(3)}:{web.port}/hot"
        assert web.description["popular_url"] == popular
        same = TestWeb(
            hosts=4, pages=3, host_pages={1: 150}, traps={2: "minted", 4: "repeat"},
            popular=(3, "/hot"), port=web.port,
        )  # fmt: skip
        assert web.expected_urls == same.expected_urls == web.reachable_urls(lambda u: True)
        assert get(popular)[0] == 200 and get(web.seeds[0] + "p/149")[0] == 200
        assert get(web.seeds[3] + "x/x/")[0] == 200
        minted = next(u for u in links_of(web.seeds[1], get(web.seeds[1])[1]) if "/m/" in u)
        assert get(minted)[0] == 200 and web.trap_kind(minted) == "minted"
    log = web.stop()
    assert web.trap_fetches(log) == Counter({2: 1, 4: 1})
    assert fetches_by_host(log)[host_ip(2)] == 2
    # --popular HOST:PATH as a string; --traps as inline JSON.
    options = {"hosts": 2, "pages": 2, "popular": "2:/x", "traps": '{"1": "calendar"}'}
    with WebProcess(tmp_path / "web2", options) as web2:
        assert web2.description["params"]["popular"] == [2, "/x"]
        assert web2.description["trap_hosts"] == {host_ip(1): "calendar"}
        assert get(f"http://{host_ip(2)}:{web2.port}/x")[0] == 200


# -- versions, validators and conditional GET ---------------------------------------------


def test_change_bumps_a_version_and_version_0_renders_as_before() -> None:
    for realistic in (False, True):
        web = TestWeb(hosts=3, pages=4, port=8000, mirrors={3: 1}, realistic=realistic)
        before = {key: web.render(*key) for key in web.graph}
        assert all(web.version(*key) == 0 for key in web.graph)
        assert (web.change(1, 2), web.change(1, 2), web.version(1, 2)) == (1, 2, 2)
        changed = web.render(1, 2)
        assert changed != before[1, 2] and b"<p>Revision 2: " in changed
        assert web.render(1, 2, 0) == before[1, 2]  # any version renders on demand
        assert web.render(1, 2, 1) not in (before[1, 2], changed)
        # Title and links stay: only the text moves.
        assert re.findall(rb"<title>.*?</title>", changed) == re.findall(
            rb"<title>.*?</title>", before[1, 2]
        )
        assert HREF.findall(changed.decode()) == HREF.findall(before[1, 2].decode())
        # Other pages, the mirror's copy of the page included, keep their version.
        assert all(web.render(*key) == before[key] for key in web.graph if key != (1, 2))
        assert web.version(3, 2) == 0
        web.change(3, 2)
        web.change(3, 2)  # the mirror at version 2 shows its source at version 2
        paragraphs = re.compile(rb"<p>(.*?)</p>", re.S)  # the text, not the links
        assert paragraphs.findall(web.render(3, 2)) == paragraphs.findall(changed)
        assert paragraphs.findall(web.render(3, 2, 0)) == paragraphs.findall(before[1, 2])
        with pytest.raises(KeyError):
            web.change(1, 4)  # no such page
        with pytest.raises(KeyError):
            web.version(4, 0)


def test_every_change_moves_the_digest_and_the_simhash() -> None:
    from crawlproject.dedupe.fingerprint import hamming, page_fingerprint

    for realistic in (False, True):
        web = TestWeb(hosts=5, pages=10, port=8000, realistic=realistic)
        for key in web.graph:
            pages = [web.render(*key, version) for version in range(4)]
            assert len({hashlib.sha1(page).digest() for page in pages}) == 4, key
            simhashes = [page_fingerprint(page.decode())[0] for page in pages]
            for i, a in enumerate(simhashes):
                assert all(hamming(a, b) > 0 for b in simhashes[i + 1 :]), (key, realistic)


def test_validators_and_conditional_get(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=2, pages=3, validators=True)
    resp, body = raw_get(web, 1, "/p/1")
    etag0, modified0 = '"1-1-0"', "Thu, 01 Jan 2026 00:00:00 GMT"
    assert (resp.status, resp.getheader("ETag"), resp.getheader("Last-Modified")) == (
        200, etag0, modified0,
    )  # fmt: skip
    assert body == web.render(1, 1, 0)
    assert raw_get(web, 2, "/")[0].getheader("ETag") == '"2-0-0"'
    resp, body = raw_get(web, 1, "/p/1", {"If-None-Match": etag0})
    assert (resp.status, resp.reason, body) == (304, "Not Modified", b"")
    assert (resp.getheader("ETag"), resp.getheader("Last-Modified")) == (etag0, modified0)
    assert resp.getheader("Content-Length") is None and resp.getheader("Content-Type") is None
    assert raw_get(web, 1, "/p/1?b=2&a=1", {"If-None-Match": etag0})[0].status == 304

    assert web.change(1, 1) == 1
    resp, body = raw_get(web, 1, "/p/1", {"If-None-Match": etag0})  # an old tag: the page
    etag1, modified1 = '"1-1-1"', "Fri, 02 Jan 2026 00:00:00 GMT"
    assert (resp.status, resp.getheader("ETag"), resp.getheader("Last-Modified")) == (
        200, etag1, modified1,
    )  # fmt: skip
    assert body == web.render(1, 1, 1) != web.render(1, 1, 0)
    for tags, status in [
        (f'"x", {etag1}', 304), (f"W/{etag1}", 304), ("*", 304), (f"{etag0}, \"x\"", 200),
        (etag1.strip('"'), 200),  # unquoted: not the tag
    ]:  # fmt: skip
        assert raw_get(web, 1, "/p/1", {"If-None-Match": tags})[0].status == status, tags
    for since, status in [
        (modified1, 304), ("Sat, 03 Jan 2026 00:00:00 GMT", 304),
        ("Thu, 01 Jan 2026 23:59:59 GMT", 200), (modified0, 200), ("yesterday", 200),
    ]:  # fmt: skip
        assert raw_get(web, 1, "/p/1", {"If-Modified-Since": since})[0].status == status, since
    # If-None-Match wins over If-Modified-Since, either way round.
    both = {"If-None-Match": etag0, "If-Modified-Since": modified1}
    assert raw_get(web, 1, "/p/1", both)[0].status == 200
    both = {"If-None-Match": etag1, "If-Modified-Since": modified0}
    assert raw_get(web, 1, "/p/1", both)[0].status == 304
    # Other pages and non-pages are untouched: no validators on a 404.
    assert raw_get(web, 1, "/p/2", {"If-None-Match": '"1-2-0"'})[0].status == 304
    resp, _ = raw_get(web, 1, "/nope", {"If-None-Match": "*"})
    assert (resp.status, resp.getheader("ETag")) == (404, None)


def test_a_304_keeps_the_connection_usable(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=1, pages=2, validators=True)
    conn = http.client.HTTPConnection(host_ip(1), web.port, timeout=10)
    try:
        answers = []
        for tag in ('"1-0-0"', '"1-0-9"', '"1-0-0"'):
            conn.request("GET", "/", headers={"If-None-Match": tag})
            resp = conn.getresponse()
            answers.append((resp.status, len(resp.read())))
    finally:
        conn.close()
    assert answers == [(304, 0), (200, len(web.render(1, 0))), (304, 0)]
    assert len(web.log) == 3  # one connection, three answers


def test_log_records_the_conditional_headers(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=1, pages=2, validators=True, popular=(1, "/hot"))
    raw_get(web, 1, "/")
    raw_get(web, 1, "/", {"If-None-Match": '"1-0-0"'})
    raw_get(web, 1, "/p/1", {"If-Modified-Since": "Thu, 01 Jan 2026 00:00:00 GMT"})
    web.change(1, POPULAR_PAGE)
    raw_get(web, 1, "/hot", {"If-None-Match": '"1--1-0"'})
    assert [(r.path, r.status, r.if_none_match, r.if_modified_since) for r in web.log] == [
        ("/", 200, None, None),
        ("/", 304, '"1-0-0"', None),
        ("/p/1", 304, None, "Thu, 01 Jan 2026 00:00:00 GMT"),
        ("/hot", 200, '"1--1-0"', None),  # the popular page changes too
    ]
    assert web.log[-1].headers["if-none-match"] == '"1--1-0"'  # in headers as ever
    assert rec("a", 0, 1).if_none_match is None  # old-style constructions still work


def test_without_validators_conditional_headers_are_ignored_but_logged(
    testweb_factory: WebFactory,
) -> None:
    web = testweb_factory(hosts=1, pages=2)
    resp, body = raw_get(web, 1, "/p/1", {"If-None-Match": "*", "If-Modified-Since": "x"})
    assert (resp.status, body) == (200, web.render(1, 1))
    assert (resp.getheader("ETag"), resp.getheader("Last-Modified")) == (None, None)
    assert (web.log[0].if_none_match, web.log[0].if_modified_since) == ("*", "x")
    web.change(1, 1)  # pages change all the same
    assert raw_get(web, 1, "/p/1")[1] == web.render(1, 1, 1) != body


def test_change_while_serving_keeps_body_and_etag_in_step(testweb_factory: WebFactory) -> None:
    web = testweb_factory(hosts=1, pages=1, validators=True)
    stop = threading.Event()

    def changer() -> None:
        while not stop.is_set():
            web.change(1, 0)

    thread = threading.Thread(target=changer)
    thread.start()
    try:
        answers = [raw_get(web, 1, "/") for _ in range(30)]
    finally:
        stop.set()
        thread.join()
    for resp, body in answers:
        version = int(str(resp.getheader("ETag")).strip('"').split("-")[2])
        assert body == web.render(1, 0, version)
    assert web.version(1, 0) > 0


def test_process_mode_with_validators(tmp_path: Path) -> None:
    with WebProcess(tmp_path, {"hosts": 2, "pages": 2, "validators": True}) as web:
        assert web.description["params"]["validators"] is True and web.web().validators
        assert raw_get(web, 2, "/p/1")[0].getheader("ETag") == '"2-1-0"'
        resp, body = raw_get(web, 2, "/p/1", {"If-None-Match": '"2-1-0"'})
        assert (resp.status, body) == (304, b"")
    log = web.stop()
    assert [(r.status, r.if_none_match, r.if_modified_since) for r in log] == [
        (200, None, None), (304, '"2-1-0"', None),
    ]  # fmt: skip
    with WebProcess(tmp_path / "off", {"hosts": 1, "pages": 1, "validators": False}) as off:
        assert off.description["params"]["validators"] is False
        assert raw_get(off, 1, "/", {"If-None-Match": "*"})[0].status == 200
