"""The synthetic loopback web: serving, latency, logging, graph, analysis helpers."""

from __future__ import annotations

import base64
import hashlib
import html
import http.client
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from tests.support.testweb import (
    OUT_OF_SCOPE_IP,
    RequestRecord,
    TestWeb,
    WebProcess,
    canonical_url,
    fetch_counts,
    host_ip,
    politeness_report,
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
