"""The parts of rendering that need no browser (crawlproject/render/): page
templates, what rendering changed, the fleet's learning in a real Redis, and
page methods stored through the frontier's request codec."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy_playwright.page import PageMethod

from crawlproject.default_settings import CRAWL_REQUEST_CLASSES
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.render.compare import PageContent, difference, has_script
from crawlproject.render.config import RenderConfig
from crawlproject.render.learning import RenderLearning, Why
from crawlproject.render.page_methods import NotStorable, from_data, to_data
from crawlproject.render.session import decoded_body
from crawlproject.render.templates import host_of, page_template
from crawlproject.setting_values import ConfigError
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.js_sites import JS_IP, SHELL, JsOnlySite, JsWeb, MixedSite, StaticSite
from testkit.redis_server import RedisServer


def test_page_templates() -> None:
    assert page_template("http://a.example/item/12") == page_template("http://a.example/item/13")
    assert page_template("http://a.example/item/12") == "/item/N"
    assert page_template("http://a.example/post/hello-world") == "/post/a-a"
    assert page_template("http://a.example/p/3.html?id=4&b=") == "/p/N.a?b&id"
    assert page_template("http://a.example/") == "/"
    assert page_template("http://a.example/list/2") != page_template("http://a.example/item/2")
    assert host_of("http://A.example:80/x") == "a.example"
    assert host_of("https://a.example:8443/x") == "a.example:8443"


def test_a_harmless_script_does_not_matter_a_built_page_does() -> None:
    static = StaticSite()
    body = static.route("/p/3.html")
    assert body is not None and has_script(body.payload)
    raw = PageContent.of(body.payload, "http://s.example/p/3.html")
    with_year = body.payload.replace(b'<span id="year"></span>', b'<span id="year">2026</span>')
    assert not difference(raw, PageContent.of(with_year, "http://s.example/p/3.html")).matters
    assert not raw.is_shell
    shell = PageContent.of(SHELL.format(title="App", script="/a.js"), "http://j.example/app/1")
    assert shell.is_shell
    built = SHELL.replace('<div id="app"></div>', '<div id="app"><a href="/app/2">next</a></div>')
    diff = difference(
        shell, PageContent.of(built.format(title="App", script="/a.js"), "http://j.example/app/1")
    )
    assert diff.matters and diff.new_links == 1
    listing = MixedSite().route("/list/1")
    assert listing is not None and not PageContent.of(listing.payload, "http://m/").is_shell
    assert JsOnlySite().route("/app/1") is not None


@pytest.fixture
def learning() -> Iterator[RenderLearning]:
    with RedisServer() as server:
        yield RenderLearning(Redis.from_url(server.url), "cp:{t}:render", sample_every=5)


def test_the_fleet_learns_per_host_and_template(learning: RenderLearning) -> None:
    shell = PageContent(frozenset(), frozenset(), 10)
    rich = PageContent(frozenset({"http://h/a", "http://h/b", "http://h/c"}), frozenset(), 900)

    async def run() -> None:
        # An unknown host: its first page is rendered to learn.
        first = await learning.decide("h", "/", lambda: rich)
        assert first.why is Why.LEARN
        assert await learning.learn("h", "/", first.prior, difference(rich, rich)) == "static"
        # A rich page of a new template on that host: static like the others,
        # re-checked once in 5 pages.
        whys = [(await learning.decide("h", "/p/N", lambda: rich)).why for _ in range(10)]
        assert whys.count(Why.SAMPLE) == 2 and whys.count(Why.STATIC) == 8
        # A shell of a new template is rendered to learn; it needs rendering.
        item = await learning.decide("h", "/item/N", lambda: shell)
        assert item.why is Why.LEARN
        built = PageContent(frozenset({"http://h/x"}), frozenset(), 500)
        assert await learning.learn("h", "/item/N", item.prior, difference(shell, built)) == "js:0"
        again = await learning.decide("h", "/item/N", lambda: shell)
        assert again.why is Why.JS
        # Two renders in a row that change nothing: static again.
        state = await learning.learn("h", "/item/N", again.prior, difference(shell, shell))
        assert state == "js:1"
        state = await learning.learn("h", "/item/N", state, difference(shell, shell))
        assert state == "static"
        await learning.redis.aclose()

    asyncio.run(run())


def test_page_methods_travel_through_the_frontier_as_data() -> None:
    spider = Spider("s")
    methods = [PageMethod("wait_for_selector", "div.quote", timeout=5000), PageMethod("click", "a")]
    request = Request(
        "http://q.example/", meta={"playwright": True, "playwright_page_methods": to_data(methods)}
    )
    codec = RequestCodec(CRAWL_REQUEST_CLASSES)
    back = codec.decode(codec.encode(request, spider), spider)
    restored = from_data(back.meta["playwright_page_methods"])
    assert [(m.method, m.args, m.kwargs) for m in restored] == [
        ("wait_for_selector", ("div.quote",), {"timeout": 5000}),
        ("click", ("a",), {}),
    ]
    assert back.meta["playwright"] is True
    with pytest.raises(NotStorable):
        to_data([PageMethod(lambda page: None)])


def test_wrong_render_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="CRAWL_RENDER 'sometimes'"):
        RenderConfig.from_settings(Settings({"CRAWL_RENDER": "sometimes"}))
    with pytest.raises(ConfigError, match="CRAWL_RENDER_CONCURRENCY"):
        RenderConfig.from_settings(Settings({"CRAWL_RENDER_CONCURRENCY": 0}))
    missing = Settings({"CRAWL_BROWSER_PATH": "/nonexistent/chromium"})
    assert RenderConfig.from_settings(missing).browser_path() is None


def test_without_a_browser_nothing_is_rendered_said_once(tmp_path: Path) -> None:
    with RedisServer() as redis, JsWeb({JS_IP: JsOnlySite(pages=2)}) as web:
        settings = {
            "CRAWL_BROWSER_PATH": "/nonexistent/chromium",
            "CRAWL_HOST_DELAY": 0.05,
            "CRAWL_IDLE_CLOSE_SECONDS": 1.0,
            "CRAWL_IDLE_POLL_SECONDS": 0.2,
        }
        proc = start_worker(REPO_ROOT, redis.url, "nobrowser", [web.base_url(JS_IP) + "/"],
                            settings, tmp_path / "w.log")  # fmt: skip
        assert wait_all([proc], timeout=60, check=False) == [0]
        pages = [r.path for r in web.log if r.path != "/robots.txt"]
    log = (tmp_path / "w.log").read_text()
    lines = [line for line in log.splitlines() if "Rendering: no browser" in line]
    assert len(lines) == 1 and "WARNING" in lines[0] and "CRAWL_BROWSER_PATH" in lines[0]
    # The shell's links exist only once rendered: the crawl has its home page only.
    assert pages == ["/"]
    stats = stats_of(tmp_path / "w.log")
    assert stats["render/why/no_browser"] == 1 and "render/pages" not in stats


def test_a_compressed_page_is_decoded_within_the_size_limit() -> None:
    page = b"<html><script></script>" + b"x" * 5000 + b"</html>"
    gz = gzip.compress(page)
    response = HtmlResponse("http://g.example/", body=gz, headers={"Content-Encoding": "gzip"})
    assert decoded_body(response, 10_000) == page
    assert decoded_body(response, 1_000) is None  # a gzip bomb stops at the limit
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    body = raw_deflate.compress(page) + raw_deflate.flush()
    deflated = HtmlResponse("http://g.example/", body=body, headers={"Content-Encoding": "deflate"})
    assert decoded_body(deflated, 10_000) == page
    brotli = HtmlResponse("http://g.example/", body=b"..", headers={"Content-Encoding": "br"})
    assert decoded_body(brotli, 10_000) is None
