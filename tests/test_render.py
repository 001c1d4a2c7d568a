"""Rendering only where needed (issue 45), on a loopback test web
(testkit/js_sites.py): two workers on one Redis, the defaults plus
CRAWL_RENDER=auto, crawl a JavaScript-only site, a static site with a harmless
script and a mixed site (static listings, JavaScript detail pages).

The browser's own cases, each a worker of its own (a scrapy-playwright spider,
a browser killed, a page never quiet), are in tests/test_render_browser.py:
a file of their own, so that pytest-xdist (a file at a time per process) runs
them beside this module's crawl rather than after it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings
from warcio.archiveiterator import ArchiveIterator

from crawlproject.render.config import RenderConfig
from testkit.crawlproc import (
    REPO_ROOT,
    crawl_status,
    start_worker,
    stats_of,
    wait_all,
    wait_until,
)
from testkit.js_sites import JS_IP, JS_SITE_IPS, MIXED_IP, STATIC_IP, JsWeb, browser_pids
from testkit.redis_server import RedisServer
from testkit.testweb import RequestRecord

BROWSER = RenderConfig.from_settings(Settings({"CRAWL_RENDER": "auto"})).browser_path()
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH (./run installs it)")

DELAY = 0.1
SETTINGS = {
    "CRAWL_RENDER": "auto",
    "CRAWL_HOST_DELAY": DELAY,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
}


class Crawl:
    def __init__(
        self, web: JsWeb, out: Path, codes: list[int], marker: str, status: dict[str, Any]
    ) -> None:
        self.web, self.out, self.codes, self.marker, self.status = web, out, codes, marker, status
        self.log: list[RequestRecord] = list(web.log)
        self.stats = [stats_of(out / f"w{i}.log") for i in range(2)]

    def requests(self, ip: str, path: str | None = None) -> list[RequestRecord]:
        return [r for r in self.log if r.host_ip == ip and (path is None or r.path == path)]

    def total(self, name: str) -> int:
        return sum(s.get(name, 0) for s in self.stats)

    def warc_records(self) -> dict[str, tuple[str, bytes]]:
        """URL -> (record type, payload) of its response or revisit record."""
        found: dict[str, tuple[str, bytes]] = {}
        for path in (self.out / "data").rglob("*.warc.gz"):
            with open(path, "rb") as stream:
                for record in ArchiveIterator(stream):
                    if record.rec_type in ("response", "revisit"):
                        url = record.rec_headers.get_header("WARC-Target-URI")
                        found[url] = (record.rec_type, record.content_stream().read())
        return found


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    out = tmp_path_factory.mktemp("render")
    marker = uuid.uuid4().hex
    with RedisServer() as redis, JsWeb() as web:
        seeds = [web.base_url(ip) + "/" for ip in JS_SITE_IPS]
        settings = {**SETTINGS, "CRAWL_DATA_DIR": str(out / "data")}
        env = {"RENDER_TEST_MARKER": marker}
        procs = [
            start_worker(
                REPO_ROOT,
                redis.url,
                "render",
                seeds if i == 0 else [],
                settings,
                out / f"w{i}.log",
                env=env,
            )
            for i in range(2)
        ]
        codes = wait_all(procs, timeout=120, check=False)
        status = crawl_status(redis.url, "render")
        yield Crawl(web, out, codes, marker, status)


def test_both_workers_end_by_themselves_exit_0(crawl: Crawl) -> None:
    assert crawl.codes == [0, 0], [(crawl.out / f"w{i}.log").read_text()[-3000:] for i in (0, 1)]
    for i in (0, 1):
        assert " ERROR: " not in (crawl.out / f"w{i}.log").read_text()


def test_every_page_fetched_once(crawl: Crawl) -> None:
    for ip in JS_SITE_IPS:
        for path in crawl.web.sites[ip].pages():
            assert len(crawl.requests(ip, path)) == 1, (ip, path)


def test_static_pages_rarely_rendered(crawl: Crawl) -> None:
    # Each render of a page with the harmless script fetches it once.
    static = crawl.web.sites[STATIC_IP]
    renders = len(crawl.requests(STATIC_IP, "/static/year.js"))
    assert 1 <= renders <= 0.05 * len(static.pages())
    mixed = crawl.web.sites[MIXED_IP]
    listing_renders = len(crawl.requests(MIXED_IP, "/static/year.js"))
    assert listing_renders <= 0.10 * len(mixed.listing_paths())


def test_javascript_pages_rendered_and_crawled_whole(crawl: Crawl) -> None:
    js = crawl.web.sites[JS_IP]
    # Their links exist only in the DOM: every page was found, and each render
    # fetched its API answer once.
    for path in js.api_paths():
        assert len(crawl.requests(JS_IP, path)) == 1, path
    mixed = crawl.web.sites[MIXED_IP]
    for path in mixed.detail_paths():
        assert len(crawl.requests(MIXED_IP, "/api" + path + ".json")) == 1, path


def test_render_responses_in_the_warc(crawl: Crawl) -> None:
    records = crawl.warc_records()
    base = crawl.web.base_url(JS_IP)
    for path in crawl.web.sites[JS_IP].api_paths():
        assert json.loads(records[base + path][1])["title"].startswith("App page")
    assert b"fetch(" in records[base + "/static/app.js"][1]
    # A page's own record is the document as the server sent it (a replay runs
    # its script again), not the DOM the spider read: the same shell for every
    # page, so one response record and revisits of it.
    pages = [records[base + path] for path in crawl.web.sites[JS_IP].pages()]
    shell = [body for kind, body in pages if kind == "response"]
    assert len(shell) == 1 and shell[0].endswith(b'<div id="app"></div></body></html>')


def test_browser_requests_gated(crawl: Crawl) -> None:
    # robots.txt of the JS site disallows /private/: its script asks for it on
    # every page, the browser never got it; the metadata address (another
    # host, refused by the guard) neither.
    assert crawl.requests(JS_IP, "/private/data.json") == []
    js_renders = len(crawl.web.sites[JS_IP].pages())
    assert crawl.total("render/blocked/robots") == js_renders
    assert crawl.total("render/blocked/other_host") == js_renders
    assert crawl.total("render/blocked") >= 2 * js_renders


def test_politeness_includes_subresources(crawl: Crawl) -> None:
    for ip in JS_SITE_IPS:
        pages = set(crawl.web.sites[ip].pages())
        log = sorted(crawl.requests(ip), key=lambda r: r.start)
        for i, rec in enumerate(log):
            if rec.path not in pages:
                continue
            before = [r.end for r in log[:i]]
            if before:
                gap = rec.start - max(before)
                assert gap >= DELAY - 0.005, (ip, rec.path, gap)


def test_render_stats_in_crawlproject_status(crawl: Crawl) -> None:
    group = crawl.status["fleet"]["groups"]["render"]
    for name in ("pages", "skipped", "blocked", "seconds"):
        assert group[name] == crawl.total(f"render/{name}"), name


def test_no_browser_outlives_its_worker(crawl: Crawl) -> None:
    wait_until(lambda: not browser_pids(crawl.marker), timeout=10)
