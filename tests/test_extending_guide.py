"""docs/extending.md runs as printed (issue 34, item 9).

The test reads the guide itself, not a copy: every ``python`` code block goes
to the file the text before it names (``spiders/catalog.py``, ...; a block for
``crawlproject/settings.py`` is appended to it) in a scratch copy of the
project, and each section's ``scrapy crawl ...`` command runs there as a real
crawl on a real redis-server, against a loopback test web that serves the
guide's example sites (testkit/guide_sites.py). Only the example sites'
addresses (``https://example.com/``, ``https://shop.example/``) are replaced,
in the blocks and the commands alike, by the test web's hosts; the test adds
its environment as ``-s`` settings (REDIS_URL, the loopback allowance, short
politeness and idle times, a data directory).

The spider and pipeline sections rely on the frontier's rules the guide
describes (a spider's crawl named after it, private callbacks stored): this
test checks them as promised.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis as redis_lib

from testkit.crawlproc import LOOPBACK_ALLOW, WorkerProcess, stats_of, wait_all
from testkit.guide_sites import (
    JSON_DOCUMENTS,
    MISSING_PRODUCT,
    json_api_routes,
    products,
    shop_routes,
)
from testkit.redis_server import RedisServer
from testkit.scratch import scratch_project as copy_project
from testkit.testweb import TestWeb, canonical_url, page_counts

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "extending.md"
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<code>.*?)^(?P=indent)```$", re.S | re.M)
PATH_SPAN = re.compile(r"`([\w/]+\.py)`")
COMMAND_SPAN = re.compile(r"`(scrapy crawl [^`]+)`")
SHOP = "https://shop.example/"
EXAMPLE_COM = "https://example.com/"
ENVIRONMENT = {
    "CRAWL_GUARD_ALLOW": LOOPBACK_ALLOW,
    "CRAWL_HOST_DELAY": "0.05",
    "CRAWL_IDLE_CLOSE_SECONDS": "1.5",
    "CRAWL_IDLE_POLL_SECONDS": "0.2",
}


def sections() -> dict[str, str]:
    """The guide's ``## `` sections by title."""
    parts = re.split(r"^## ", GUIDE.read_text(encoding="utf-8"), flags=re.M)[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def code_blocks(section: str) -> list[tuple[str, str]]:
    """(path the text before it names, code) of each python block."""
    blocks = []
    start = 0
    for match in FENCE.finditer(section):
        if match["lang"] == "python":
            before = PATH_SPAN.findall(section[start : match.start()])
            assert before, f"no file named before the block at {match.start()}"
            blocks.append((before[-1], textwrap.dedent(match["code"])))
        start = match.end()
    return blocks


def commands(section: str) -> list[str]:
    return COMMAND_SPAN.findall(section)


def section(title_start: str) -> str:
    [found] = [text for title, text in sections().items() if title.startswith(title_start)]
    return found


class Sites:
    """The example sites' addresses on the test web."""

    def __init__(self, web: TestWeb) -> None:
        self.shop = web.base_url(1)
        self.example = web.base_url(2)

    def __call__(self, text: str) -> str:
        return text.replace(SHOP, self.shop).replace(EXAMPLE_COM, self.example)


def scratch_project(tmp_path: Path, sites: Sites) -> Path:
    """A copy of the project with every block of the guide written in."""
    root = copy_project(tmp_path)
    for title in sections():
        for path, code in code_blocks(sections()[title]):
            target = root / path
            if path == "crawlproject/settings.py":
                with target.open("a", encoding="utf-8") as out:
                    out.write("\n" + sites(code))
            else:
                assert not target.exists(), f"the guide's {path} would replace a project file"
                target.write_text(sites(code), encoding="utf-8")
    return root


def run_printed(
    command: str, root: Path, redis: RedisServer, sites: Sites, log: Path
) -> WorkerProcess:
    """The guide's command, in the scratch project, with the test's environment."""
    words = shlex.split(sites(command))
    assert words[:2] == ["scrapy", "crawl"], command
    cmd = [sys.executable, "-m", *words]
    settings = {**ENVIRONMENT, "REDIS_URL": redis.url, "CRAWL_DATA_DIR": str(root / "data")}
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    with log.open("wb") as out:
        proc = WorkerProcess(
            cmd, cwd=root, env={**os.environ, "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    proc.log_path = log
    return proc


@pytest.fixture
def guide_web(testweb_factory: Callable[..., TestWeb]) -> TestWeb:
    return testweb_factory(
        hosts=2, pages=1, latency_ms=0, links=1, cross_links=0, query_variants=0,
        special={1: shop_routes(), 2: json_api_routes()},
    )  # fmt: skip


def test_the_guide_names_each_example_and_its_command() -> None:
    titles = list(sections())
    assert [t.split(" (")[0] for t in titles] == [
        "Your first spider", "A content-type processor", "A spider", "An item pipeline",
    ]  # fmt: skip
    # The first section's commands are run by tests/test_first_spider.py.
    assert commands(section("Your first spider")) == []
    assert [p for p, _ in code_blocks(section("A content-type processor"))] == [
        "pipelines/content/json_links.py", "crawlproject/settings.py",
    ]  # fmt: skip
    assert [p for p, _ in code_blocks(section("A spider"))] == ["spiders/catalog.py"]
    assert [p for p, _ in code_blocks(section("An item pipeline"))] == [
        "pipelines/sqlite_records.py", "crawlproject/settings.py",
    ]  # fmt: skip
    for title in ("A content-type processor", "A spider", "An item pipeline"):
        assert len(commands(section(title))) == 1, title


def test_the_content_type_processor_example(
    guide_web: TestWeb, redis_server: RedisServer, tmp_path: Path
) -> None:
    sites = Sites(guide_web)
    root = scratch_project(tmp_path, sites)
    [command] = commands(section("A content-type processor"))
    proc = run_printed(command, root, redis_server, sites, tmp_path / "json.log")
    wait_all([proc], timeout=120)
    records = [json.loads(line) for line in (root / "items.jsonl").read_text().splitlines()]
    by_url = {r["url"]: r for r in records}
    documents = {sites.example + p.lstrip("/"): name for p, (name, _) in JSON_DOCUMENTS.items()}
    # Each document is fetched (its links followed) and gets the processor's field.
    assert set(by_url) == set(documents)
    assert {u: r["title"] for u, r in by_url.items()} == documents
    assert all(r["status"] == 200 and "warc_file" in r for r in records)
    stats = stats_of(proc.log_path)
    assert stats["content/processed/json"] == len(documents)
    assert "content/error/json" not in stats


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """The database held by another writer (a RESERVED lock): readers go on,
    no one else may write until it is released."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS records (url TEXT PRIMARY KEY, item TEXT)")
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


def test_the_spider_and_item_pipeline_examples(
    guide_web: TestWeb,
    redis_server_factory: Callable[..., RedisServer],
    tmp_path: Path,
) -> None:
    sites = Sites(guide_web)
    root = scratch_project(tmp_path, sites)
    expected = {
        sites.shop + p.path.lstrip("/"): {"name": p.name, "price": p.price, "category": p.category}
        for p in products()
    }

    # The spider: one item per product, each page fetched once, in its own crawl.
    redis = redis_server_factory()
    [command] = commands(section("A spider"))
    proc = run_printed(command, root, redis, sites, tmp_path / "spider.log")
    assert wait_all([proc], timeout=180) == [0]
    items = [json.loads(line) for line in (root / "products.jsonl").read_text().splitlines()]
    assert len(items) == len(expected)
    assert {i["url"]: {k: i[k] for k in ("name", "price", "category")} for i in items} == expected
    fetched = page_counts(guide_web.log)
    shop_host = canonical_url(sites.shop)
    shop_fetches = {u: n for u, n in fetched.items() if u.startswith(shop_host)}
    assert set(shop_fetches.values()) == {1}
    assert canonical_url(sites.shop + MISSING_PRODUCT.lstrip("/")) in shop_fetches  # never an item
    keys = redis_lib.Redis.from_url(redis.url).keys("cp:{*")
    crawls = {k.decode().split("{", 1)[1].split("}", 1)[0].split("/")[0] for k in keys}
    assert crawls == {"catalog"}  # named after the spider, not "web"

    # The item pipeline: the database locked by another writer, the worker
    # stops with item_not_saved (exit 1); run again once it is free, every
    # product is a row.
    redis = redis_server_factory()
    [command] = commands(section("An item pipeline"))
    database = root / "records.sqlite"
    with locked(database):
        proc = run_printed(command, root, redis, sites, tmp_path / "pipeline-locked.log")
        assert wait_all([proc], timeout=180, check=False) == [1]
    log = proc.log_path.read_text()
    assert "item_not_saved" in log and "database is locked" in log
    proc = run_printed(command, root, redis, sites, tmp_path / "pipeline.log")
    assert wait_all([proc], timeout=180) == [0]
    with sqlite3.connect(database) as db:
        rows = {url: json.loads(item) for url, item in db.execute("SELECT url, item FROM records")}
    assert {u: {k: r[k] for k in ("name", "price", "category")} for u, r in rows.items()} == (
        expected
    )
