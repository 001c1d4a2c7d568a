"""Path-ascending discovery (middlewares/path_ascending.py): in memory, then a real crawl."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawlproject import settings as project_settings
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY, SEED_META_KEY
from middlewares.path_ascending import PathAscendingSpiderMiddleware, parent_directories
from spiders.web import WebSpider
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb, page_counts

MIDDLEWARE = "middlewares.path_ascending.PathAscendingSpiderMiddleware"
# Above DepthMiddleware (900): its requests get Scrapy's depth accounting, like links.
SPIDER_MIDDLEWARES = {**project_settings.SPIDER_MIDDLEWARES, MIDDLEWARE: 950}
BASE = "http://127.0.3.1:8000"
HOST = "127.0.3.1:8000"


def test_parent_directories() -> None:
    assert parent_directories("/a/b/page.html") == ["/a/b/", "/a/", "/"]
    assert parent_directories("/a/b/") == ["/a/", "/"]
    assert parent_directories("/a/b") == ["/a/", "/"]
    assert parent_directories("/a") == ["/"]
    assert parent_directories("/") == []
    assert parent_directories("") == []
    assert parent_directories("/a//b/c") == ["/a//b/", "/a/", "/"]


def make_middleware(**spider_args: Any) -> tuple[PathAscendingSpiderMiddleware, WebSpider]:
    crawler = get_crawler(WebSpider, {"CRAWL_PATH_ASCENDING": True})
    spider = WebSpider.from_crawler(crawler, seeds=BASE + "/", **spider_args)
    assert isinstance(spider, WebSpider)
    crawler.spider = spider
    return PathAscendingSpiderMiddleware.from_crawler(crawler), spider


async def run(
    mw: PathAscendingSpiderMiddleware,
    url: str,
    status: int = 200,
    callback: Any = None,
    **meta: Any,
) -> list[Any]:
    request = Request(url, callback=callback, meta={SCOPE_META_KEY: HOST, "depth": 2, **meta})
    response = HtmlResponse(url, status=status, body=b"<html></html>", request=request)

    async def spider_output() -> AsyncIterator[Any]:
        yield {"url": url}
        yield Request(BASE + "/link")

    return [obj async for obj in mw.process_spider_output(response, spider_output())]


async def test_yields_parents_after_the_spiders_output() -> None:
    mw, spider = make_middleware()
    out = await run(mw, BASE + "/a/b/page.html?q=1", callback=spider.parse)
    assert out[0] == {"url": BASE + "/a/b/page.html?q=1"}
    assert out[1].url == BASE + "/link"
    ascended = out[2:]
    assert [r.url for r in ascended] == [BASE + "/a/b/", BASE + "/a/", BASE + "/"]
    for r in ascended:
        assert r.callback == spider.parse and r.errback == spider.on_error
        assert r.meta == {SCOPE_META_KEY: HOST, "depth": 3}
        assert not r.dont_filter
    assert mw.stats.get_value("path_ascending/requests") == 3
    # Directories yielded once by this process are not yielded again.
    out = await run(mw, BASE + "/a/c/other.html")
    assert [r.url for r in out[2:]] == [BASE + "/a/c/"]
    assert mw.stats.get_value("path_ascending/requests") == 4


async def test_what_does_not_ascend() -> None:
    mw, spider = make_middleware(max_depth="3")
    assert len(await run(mw, BASE + "/x/404.html", status=404)) == 2
    assert len(await run(mw, BASE + "/x/sitemap.xml", callback=spider.parse_sitemap)) == 2
    assert len(await run(mw, BASE + "/")) == 2
    assert len(await run(mw, BASE + "/x/deep.html", depth=3)) == 2  # max_depth reached
    # A page redirected off-site: its directories are out of scope.
    assert len(await run(mw, "http://127.0.3.9:8000/x/y.html")) == 2
    assert mw.stats.get_value("path_ascending/requests") is None
    # A seed redirected to another host: scope follows it, as for links.
    out = await run(mw, "http://127.0.3.9:8000/x/y.html", **{SEED_META_KEY: True})
    assert [r.meta[SCOPE_META_KEY] for r in out[2:]] == ["127.0.3.9:8000"] * 2


def test_off_by_default() -> None:
    with pytest.raises(NotConfigured):
        PathAscendingSpiderMiddleware.from_crawler(get_crawler(WebSpider))


FAST = {
    "CRAWL_HOST_DELAY": 0.02,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "SPIDER_MIDDLEWARES": SPIDER_MIDDLEWARES,
}


def html(body: str) -> dict[str, str]:
    return {"content_type": "text/html; charset=utf-8", "body": f"<html><body>{body}</body></html>"}


def test_a_crawl_fetches_directories_only_ascending_reaches(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # The seed is a deep page without links; /docs/ (linking more.html) is linked
    # from nowhere, /docs/guide/ and /p/ answer 404 and / is the usual graph of 3 pages.
    special = {
        1: {
            "/docs/guide/intro.html": html("<p>An introduction without links.</p>"),
            "/docs/": html('<p>Index of the docs.</p><a href="more.html">more</a>'),
            "/docs/more.html": html("<p>More docs.</p>"),
        }
    }
    web = testweb_factory(hosts=1, pages=3, links=2, cross_links=0, special=special)
    base = web.base_url(1)
    seed = base + "docs/guide/intro.html"

    failed: dict[str, object] = {}  # fetch records of failed fetches: URL -> status

    def crawl(name: str, **settings: object) -> tuple[dict[str, int], dict[str, int]]:
        out = tmp_path / f"{name}.jsonl"
        proc = start_worker(
            REPO_ROOT, redis_url, name, [seed], {**FAST, **settings}, tmp_path / f"{name}.log",
            extra_args=["-O", str(out)],
        )  # fmt: skip
        wait_all([proc], timeout=120)
        items = [json.loads(line) for line in out.read_text().splitlines()]
        failed.update({str(i["url"]): i["status"] for i in items if "error" in i})
        pages = {str(i["url"]): int(i["depth"]) for i in items if "error" not in i}
        return stats_of(proc.log_path), pages

    stats, depths = crawl("off")
    assert set(page_counts(web.log)) == {seed}
    assert depths == {seed: 0}
    assert "path_ascending/requests" not in stats
    web.log.clear()

    stats, depths = crawl("on", CRAWL_PATH_ASCENDING=True)
    fetched = page_counts(web.log)
    expected = {seed, base + "docs/guide/", base + "docs/", base + "docs/more.html", base + "p/"}
    assert set(fetched) == expected | web.expected_urls
    assert all(n == 1 for n in fetched.values()), fetched
    assert depths[base + "docs/"] == depths[base] == 1  # the page's depth + 1
    assert depths[base + "docs/more.html"] == 2  # parsed by the spider's parse
    assert base + "docs/guide/" not in depths and base + "p/" not in depths  # 404s
    assert failed == {base + "docs/guide/": 404, base + "p/": 404}
    # intro.html's three directories and /p/ (from /p/1); the rest were yielded already.
    assert stats["path_ascending/requests"] == 4
