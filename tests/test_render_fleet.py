"""Rendering in a fleet where not every worker has a browser, and a browser
that grows (issue 45 item 5): a worker without a browser hands the pages that
must be rendered back to the frontier while a worker with one is alive, else
fetches them raw, counted (crawlproject/render/fleet.py); a browser past
CRAWL_RENDER_BROWSER_MAX_MB is restarted between renders
(crawlproject/render/recycle.py). Real redis-server, real workers, the
loopback test web of testkit/js_sites.py."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis
import redis.asyncio
from scrapy.settings import Settings

from crawlproject.render.config import RenderConfig
from crawlproject.render.fleet import ALIVE_SECONDS, HandBacks, Renderers
from crawlproject.render.learning import RenderLearning
from crawlproject.render.recycle import browser_rss_bytes
from crawlproject.render.templates import host_of
from crawlproject.setting_values import ConfigError
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all, wait_until
from testkit.js_sites import JS_IP, STATIC_IP, JsOnlySite, JsWeb, StaticSite, browser_pids
from testkit.redis_server import RedisServer

BROWSER = RenderConfig.from_settings(Settings({"CRAWL_RENDER": "auto"})).browser_path()
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium (./run installs it)")

NO_BROWSER = "/nonexistent/chromium"
SETTINGS = {
    "CRAWL_RENDER": "auto",
    "CRAWL_HOST_DELAY": 0.1,
    "CRAWL_IDLE_CLOSE_SECONDS": 3,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
}


def _seed(server: RedisServer, crawl: str, urls: list[str], render: bool) -> None:
    """Seeds as JSON entries of the crawl's seed list, asking for a render."""
    client = redis.Redis.from_url(server.url)
    entries = [json.dumps({"url": u, "meta": {"render": True}}) if render else u for u in urls]
    client.rpush(f"{crawl}:start_urls", *entries)
    client.close()


def _requests(web: JsWeb, ip: str, path: str) -> int:
    return sum(1 for r in web.log if r.host_ip == ip and r.path == path)


def test_the_registry_of_workers_that_render() -> None:
    async def run(url: str) -> None:
        client = redis.asyncio.Redis.from_url(url)
        renderers = Renderers(client, "cp:{t}:renderers")
        assert await renderers.alive() == 0
        await renderers.beat("w1")
        # A worker gone silent longer than ALIVE_SECONDS is not counted.
        await client.zadd("cp:{t}:renderers", {"w0": int((time.time() - ALIVE_SECONDS - 1) * 1000)})
        assert await Renderers(client, "cp:{t}:renderers").alive() == 1
        await renderers.leave("w1")
        assert await Renderers(client, "cp:{t}:renderers").alive() == 0
        # What the fleet learned decides before a fetch: a js template, and an
        # unknown template on a host some of whose templates are js.
        learning = RenderLearning(client, "cp:{t}:render", sample_every=5)
        learned = {"t|j|/app/N": "js:1", "h|j": "js", "t|j|/": "static", "h|s": "static"}
        await client.hset("cp:{t}:render", mapping=learned)
        assert await learning.must_render("j", "/app/N")
        assert await learning.must_render("j", "/other/N")
        assert not await learning.must_render("j", "/")
        assert not await learning.must_render("s", "/app/N")
        assert not await learning.must_render("unknown", "/")
        await client.aclose()

    with RedisServer() as server:
        asyncio.run(run(server.url))


def test_hand_backs_are_bounded_per_url() -> None:
    backs = HandBacks(most=3)
    assert [backs.may_hand_back("u") for _ in range(4)] == [True, True, True, False]
    assert backs.may_hand_back("u")  # counted afresh once fetched
    backs.fetched("u")
    assert not HandBacks(most=0).may_hand_back("u")


def test_the_browser_memory_is_read_from_its_processes(tmp_path: Path) -> None:
    """A child process named like Chromium's counts; one named otherwise not."""
    fake = tmp_path / "chromium"
    shutil.copy("/bin/sleep", fake)
    before = browser_rss_bytes()
    other = subprocess.Popen(["/bin/sleep", "30"])
    child = subprocess.Popen([str(fake), "30"])
    try:
        wait_until(lambda: browser_rss_bytes() > before)  # once exec'd under its name
        child.kill()
        child.wait()
        assert browser_rss_bytes() == before  # the other child, still running, never counted
    finally:
        for proc in (child, other):
            proc.kill()
            proc.wait()


def test_wrong_browser_limits_are_refused() -> None:
    for name in ("CRAWL_RENDER_MAX_HANDBACKS", "CRAWL_RENDER_BROWSER_MAX_MB",
                 "CRAWL_RENDER_BROWSER_MAX_RENDERS"):  # fmt: skip
        with pytest.raises(ConfigError, match=name):
            RenderConfig.from_settings(Settings({name: -1}))


def test_a_worker_without_a_browser_alone_fetches_raw_once(tmp_path: Path) -> None:
    """No worker of the fleet can render: the pages that ask for it are
    fetched raw, once each, counted, said once; the crawl ends."""
    site = JsOnlySite(pages=3)
    with RedisServer() as server, JsWeb({JS_IP: site}) as web:
        base = web.base_url(JS_IP)
        _seed(server, "alone", [base + p for p in site.pages()], render=True)
        settings = {**SETTINGS, "CRAWL_BROWSER_PATH": NO_BROWSER}
        proc = start_worker(REPO_ROOT, server.url, "alone", [], settings, tmp_path / "w.log")
        assert wait_all([proc], timeout=90, check=False) == [0], (tmp_path / "w.log").read_text()
        for path in site.pages():
            assert _requests(web, JS_IP, path) == 1, path
        assert not any(r.path.startswith("/api/") for r in web.log)  # nothing rendered
    log = (tmp_path / "w.log").read_text()
    stats = stats_of(tmp_path / "w.log")
    assert stats["render/unrendered"] == len(site.pages())
    assert "render/handed_back" not in stats
    assert log.count("fetched raw: no worker with a browser in the fleet") == 1
    assert " ERROR: " not in log


@needs_browser
def test_pages_that_must_be_rendered_go_to_the_worker_with_a_browser(tmp_path: Path) -> None:
    """Two workers on one Redis, one without a browser: every page that must
    be rendered (its seed asks, or its template was learned to need it) is
    fetched once and rendered once, by the worker with the browser; the
    static site is crawled by both; both end by themselves, exit 0."""
    marker = uuid.uuid4().hex
    js, static = JsOnlySite(pages=6), StaticSite(pages=12)
    with RedisServer() as server, JsWeb({JS_IP: js, STATIC_IP: static}) as web:
        client = redis.Redis.from_url(server.url)
        # What an earlier crawl of the fleet learned: the app pages need rendering.
        host = host_of(web.base_url(JS_IP) + "/")
        client.hset("cp:{two}:render", mapping={f"t|{host}|/app/N": "js:0", f"h|{host}": "js"})
        # Both workers up, the one with the browser in the registry, then held
        # still while the seeds come, so that the one without a browser meets
        # the first page that must be rendered. Neither ends before the seeds
        # (the fleet's frontier empty for 20 s).
        settings = {**SETTINGS, "CRAWL_IDLE_CLOSE_SECONDS": 20}
        env = {"RENDER_TEST_MARKER": marker}
        with_browser = start_worker(REPO_ROOT, server.url, "two", [], settings, tmp_path / "a.log",
                                    env=env)  # fmt: skip
        browserless = {**settings, "CRAWL_BROWSER_PATH": NO_BROWSER}
        without = start_worker(REPO_ROOT, server.url, "two", [], browserless, tmp_path / "b.log")
        wait_until(lambda: client.zcard("cp:{two}:renderers") == 1, timeout=90)
        wait_until(lambda: "Spider opened" in (tmp_path / "b.log").read_text(), timeout=90)
        with_browser.send_signal(signal.SIGSTOP)
        try:
            _seed(server, "two", [web.base_url(JS_IP) + "/"], render=True)
            _seed(server, "two", [web.base_url(STATIC_IP) + "/"], render=False)
            wait_until(lambda: "go back to the frontier" in (tmp_path / "b.log").read_text(),
                       timeout=60)  # fmt: skip
        finally:
            with_browser.send_signal(signal.SIGCONT)
        codes = wait_all([with_browser, without], timeout=180, check=False)
        logs = [(tmp_path / f"{w}.log").read_text() for w in "ab"]
        assert codes == [0, 0], [log[-3000:] for log in logs]
        for path in js.pages():
            assert _requests(web, JS_IP, path) == 1, path  # fetched once: never raw and again
        for path in js.api_paths():
            assert _requests(web, JS_IP, path) == 1, path  # rendered once
        for path in static.pages():
            assert _requests(web, STATIC_IP, path) == 1, path
        left = client.zcard("cp:{two}:renderers")
        client.close()
    a, b = stats_of(tmp_path / "a.log"), stats_of(tmp_path / "b.log")
    assert a["render/pages"] >= len(js.pages())
    assert b["render/handed_back"] >= 1
    assert "render/unrendered" not in b and "render/pages" not in b
    assert left == 0  # the worker with the browser left the registry
    for log in logs:
        assert " ERROR: " not in log
    wait_until(lambda: not browser_pids(marker), timeout=10)


@needs_browser
@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ({"CRAWL_RENDER_BROWSER_MAX_MB": 1}, "MB resident, over CRAWL_RENDER_BROWSER_MAX_MB=1"),
        ({"CRAWL_RENDER_BROWSER_MAX_MB": 0, "CRAWL_RENDER_BROWSER_MAX_RENDERS": 2}, "(2 renders)"),
    ],
    ids=["memory", "renders"],
)
def test_a_browser_that_grows_is_restarted_between_renders(
    tmp_path: Path, limit: dict[str, int], said: str
) -> None:
    """A memory limit no browser stays under (restarted after each render), or
    a count of renders: every page still fetched once and rendered once, no
    Chromium left once the worker ends."""
    marker = uuid.uuid4().hex
    site = JsOnlySite(pages=4)
    with RedisServer() as server, JsWeb({JS_IP: site}) as web:
        settings = {**SETTINGS, **limit}
        proc = start_worker(REPO_ROOT, server.url, "grows", [web.base_url(JS_IP) + "/"], settings,
                            tmp_path / "w.log", env={"RENDER_TEST_MARKER": marker})  # fmt: skip
        assert wait_all([proc], timeout=180, check=False) == [0], (tmp_path / "w.log").read_text()
        for path in site.pages():
            assert _requests(web, JS_IP, path) == 1, path
        for path in site.api_paths():
            assert _requests(web, JS_IP, path) == 1, path
    stats = stats_of(tmp_path / "w.log")
    log = (tmp_path / "w.log").read_text()
    assert stats["render/pages"] == len(site.pages())
    assert stats["render/browser_restarts"] >= 1
    # A browser launched at the first render and after each restart a render followed.
    assert 2 <= stats["playwright/browser_count"] <= stats["render/browser_restarts"] + 1
    assert "render/failed" not in stats
    assert "restarting the browser (" in log and said in log
    assert " ERROR: " not in log
    wait_until(lambda: not browser_pids(marker), timeout=10)
