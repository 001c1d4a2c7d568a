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

from tests.support.testweb import (
    ENGLISH_WORDS,
    OUT_OF_SCOPE_IP,
    Link,
    RequestRecord,
    TestWeb,
    WebProcess,
    canonical_url,
    fetch_counts,
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
    from crawlproject.frontier.urls import UrlCanonicalizer

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


def raw_get(web: TestWeb, h: int, path: str) -> tuple[http.client.HTTPResponse, bytes]:
    """GET without urllib's redirect following or error mapping."""
    conn = http.client.HTTPConnection(host_ip(h), web.port, timeout=10)
    try:
        conn.request("GET", path)
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
