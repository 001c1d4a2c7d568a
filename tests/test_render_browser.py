"""The browser's own cases of rendering (issue 45), each a worker of its own on
a loopback test web (testkit/js_sites.py): a spider as scrapy-playwright's
README writes one, a browser killed mid-crawl, a page that never goes quiet.
Split from tests/test_render.py (its shared crawl and the helpers used here)
so that pytest-xdist, a file at a time per process, can run both at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import uuid
from pathlib import Path

import pytest

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all, wait_until
from testkit.js_sites import JS_IP, BusySite, JsOnlySite, JsWeb, browser_pids
from testkit.redis_server import RedisServer
from tests.test_render import BROWSER, SETTINGS

pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH (./run installs it)")


def test_a_scrapy_playwright_spider_runs_unchanged(tmp_path: Path) -> None:
    """tests/spiders_for_tests/playwright_spider.py, as scrapy-playwright's
    README writes one: its handler in DOWNLOAD_HANDLERS, meta playwright and
    PageMethods, its requests through the shared frontier."""
    site = JsOnlySite(pages=2)
    with RedisServer() as redis, JsWeb({JS_IP: site}) as web:
        feed = tmp_path / "items.jsonl"
        settings = {
            **SETTINGS,
            "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
            "CRAWL_DATA_DIR": str(tmp_path / "data"),
        }
        proc = start_worker(REPO_ROOT, redis.url, None, [], settings, tmp_path / "w.log",
                            extra_args=["-a", f"base={web.base_url(JS_IP)}", "-O", str(feed)],
                            spider="playwright_app")  # fmt: skip
        assert wait_all([proc], timeout=90, check=False) == [0], (tmp_path / "w.log").read_text()
    items = [json.loads(line) for line in feed.read_text().splitlines()]
    # Titles exist only in the DOM: each page was rendered, its PageMethod ran.
    assert sorted(i["title"] for i in items) == sorted(f"App page {p}" for p in site.pages())
    log = (tmp_path / "w.log").read_text()
    assert "names scrapy-playwright's handler" in log
    assert " ERROR: " not in log


def test_a_browser_that_dies_is_started_again(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    site = JsOnlySite(pages=4)
    with RedisServer() as redis, JsWeb({JS_IP: site}) as web:
        settings = {**SETTINGS, "CRAWL_HOST_DELAY": 0.5, "CRAWL_DATA_DIR": str(tmp_path / "data")}
        proc = start_worker(REPO_ROOT, redis.url, "dies", [web.base_url(JS_IP) + "/"], settings,
                            tmp_path / "w.log", env={"RENDER_TEST_MARKER": marker})  # fmt: skip
        # The home page rendered (its API answered): its links are queued.
        wait_until(lambda: any(r.path == "/api/index.json" for r in web.log), timeout=60)
        for pid in browser_pids(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert wait_all([proc], timeout=90, check=False) == [0], (tmp_path / "w.log").read_text()
        later = [r.path for r in web.log if r.path.startswith("/api/app/")]
    stats = stats_of(tmp_path / "w.log")
    assert stats["playwright/browser_count"] == 2  # launched again after the kill
    assert later, "pages rendered after the browser died"
    wait_until(lambda: not browser_pids(marker), timeout=10)


def test_a_page_never_quiet_ends_at_the_time_limit(tmp_path: Path) -> None:
    with RedisServer() as redis, JsWeb({JS_IP: BusySite()}) as web:
        settings = {
            **SETTINGS,
            "CRAWL_RENDER": "always",
            "CRAWL_RENDER_TIMEOUT_SECONDS": 3,
            "CRAWL_DATA_DIR": str(tmp_path / "data"),
            "CRAWL_SOFT404_PROBE": False,
        }
        proc = start_worker(REPO_ROOT, redis.url, "busy", [web.base_url(JS_IP) + "/"], settings,
                            tmp_path / "w.log")  # fmt: skip
        assert wait_all([proc], timeout=90, check=False) == [0], (tmp_path / "w.log").read_text()
        ticks = [r for r in web.log if r.path == "/api/tick.json"]
    stats = stats_of(tmp_path / "w.log")
    assert stats["render/pages"] == 1 and stats["render/timeouts"] == 1
    # The page polled every 100 ms while it rendered, and no longer than its
    # 3 s: at most ~30 polls fetched (fewer on a loaded machine); a render
    # past its limit would have polled until the handler's safety net (60 s).
    assert 1 <= len(ticks) <= 40
