"""``crawlproject dedupe migrate``: a one-tag duplicate index, as the code
before issue 42 wrote it (tests/data/dedupe_one_tag.json, captured by
testkit/one_tag_fixture.py: never built here with today's code), made spread
through the real CLI on a real redis-server; every page of the fixture then
gets the verdict it had. A worker refuses the un-migrated index in one line
naming the command.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis
from redis.asyncio import Redis
from scrapy.settings import Settings

from crawlproject.dedupe.config import DedupeConfig
from crawlproject.dedupe.index import DedupeIndex, DedupeKind, DedupeMismatch, index_figures
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.setting_values import ConfigError
from testkit.crawlproc import REPO_ROOT, start_worker, wait_all
from testkit.one_tag_fixture import dump_keys, restore_keys
from testkit.testweb import TestWeb

FIXTURE = REPO_ROOT / "tests" / "data" / "dedupe_one_tag.json"
KEYS = CrawlKeys("old", 2)
MIGRATE_HINT = "crawlproject dedupe migrate --crawl old"


@cache
def fixture() -> dict[str, Any]:
    return dict(json.loads(FIXTURE.read_text()))


def migrate(redis_url: str, *more: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, *more, "dedupe"]
    cmd += ["migrate", "--crawl", "old"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
async def old(redis_url: str) -> AsyncIterator[Redis]:
    """The fixture's keys in the test's redis-server."""
    client = Redis.from_url(redis_url)
    await restore_keys(client, fixture()["keys"])
    yield client
    await client.aclose()


async def restore(redis_url: str) -> None:
    async with Redis.from_url(redis_url) as client:
        await restore_keys(client, fixture()["keys"])


def worker_index(client: Redis) -> DedupeIndex:
    data = fixture()
    return DedupeIndex(client, KEYS, k=data["k"], features_version=data["features_version"])


async def test_every_page_keeps_its_verdict_after_migrate(old: Redis, redis_url: str) -> None:
    data = fixture()
    done = migrate(redis_url)
    assert done.returncode == 0, done.stderr
    new = sum(1 for p in data["pages"] if p["kind"] == "new" and not p["same_url"])
    exact = sum(1 for p in data["pages"] if p["kind"] == "exact")
    near = sum(1 for p in data["pages"] if p["kind"] == "near")
    with_sim = sum(1 for p in data["pages"] if p["kind"] == "new" and not p["same_url"]
                   and p["simhash"] is not None)  # fmt: skip
    assert done.stdout.splitlines() == [
        f"crawl 'old': dedupe index migrated to the spread layout (16 parts): {new} pages "
        f"({with_sim} with a SimHash, {new} original URLs), {exact} exact and {near} near "
        f"duplicates counted; {len(data['keys']) - 1} one-tag keys removed"
    ]
    # The old keys are gone; cfg says spread, without the one-tag growth state.
    assert await old.keys(KEYS.dedupe_prefix + "*") == [KEYS.dedupe_config.encode()]
    cfg = await old.hgetall(KEYS.dedupe_config)
    assert cfg[b"parts"] == b"16" and b"xL" not in cfg and b"nn" not in cfg
    figures = await index_figures(old, KEYS)
    assert (figures["layout"], figures["pages"], figures["exact"], figures["near"]) == (
        "growing", new, exact, near,
    )  # fmt: skip
    # Every page checked again by a worker: the verdict it had. A page that
    # was new is its own URL's again (a recheck: NEW, same_url, nothing stored).
    index = worker_index(old)
    pages = data["pages"]
    batch = [
        (bytes.fromhex(p["digest"]), None if p["simhash"] is None else int(p["simhash"], 16),
         p["url"], p["host"])
        for p in pages
    ]  # fmt: skip
    verdicts = await index.check_and_add_many(batch)
    assert index.spread is not None and index.spread.spread.parts == 16
    for page, got in zip(pages, verdicts, strict=True):
        if page["kind"] == "new":
            want = (DedupeKind.NEW, page["original"] or page["url"], None, True)
        else:
            want = (DedupeKind(page["kind"]), page["original"], page["distance"], False)
        assert (got.kind, got.original, got.distance, got.same_url) == want, page
    # Nothing was stored by the rechecks; new pages near the stored ones are near.
    assert (await index_figures(old, KEYS))["pages"] == new
    stored = [p for p in pages if p["kind"] == "new" and p["simhash"] and not p["same_url"]]
    probes = [
        (bytes(20), int(p["simhash"], 16) ^ (1 << 63), f"http://probe/{n}", "probe")
        for n, p in enumerate(stored)
    ]
    for p, got in zip(stored, await index.check_and_add_many(probes), strict=True):
        assert (got.kind, got.distance, got.original) == (DedupeKind.NEAR, 1, p["url"])


async def test_a_second_migrate_and_a_crashed_one(old: Redis, redis_url: str) -> None:
    """Run again: one line, already spread. Crashed before its marker (the
    spread copy written, the old keys whole): the copy is made again, the same;
    crashed after it (old keys left): they are removed."""
    assert migrate(redis_url).returncode == 0
    after_one = await dump_keys(old)
    again = migrate(redis_url)
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr.splitlines() == [
        "crawlproject: crawl 'old': dedupe index already spread: nothing to migrate"
    ]
    # Before the marker: the old keys and cfg back, the spread copy still there.
    await old.delete(KEYS.dedupe_config)
    await restore_keys(old, fixture()["keys"])
    assert migrate(redis_url).returncode == 0
    assert await dump_keys(old) == after_one
    # After the marker: the old keys back (cfg spread).
    await restore_keys(old, {k: v for k, v in fixture()["keys"].items()
                             if bytes.fromhex(k) != KEYS.dedupe_config.encode()})  # fmt: skip
    done = migrate(redis_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"crawl 'old': dedupe index already spread; removed {len(fixture()['keys']) - 1} "
        "one-tag keys an interrupted migrate left"
    ]
    assert await dump_keys(old) == after_one


async def test_migrate_refuses_in_one_line(redis_url: str) -> None:
    done = migrate(redis_url)  # no index
    assert (done.returncode, done.stderr.splitlines()) == (
        1, ["crawlproject: crawl 'old' has no dedupe index in this Redis: nothing to migrate"],
    )  # fmt: skip
    with sync_redis.Redis.from_url(redis_url) as client:
        client.hset(KEYS.dedupe_config, "k", "3")  # fixed buckets (no b)
        done = migrate(redis_url)
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
        assert "fixed buckets" in done.stderr and "crawlproject reset --crawl old" in done.stderr
        done = migrate(redis_url, "-s", "CRAWL_DEDUPE_PARTS=0")
        assert done.stderr.splitlines() == [
            "crawlproject: CRAWL_DEDUPE_PARTS=0: the one-tag layout was removed (issue 42); "
            "a power of 2 from 1 to 128"
        ]
        assert client.hgetall(KEYS.dedupe_config) == {b"k": b"3"}


def test_parts_0_is_refused_by_the_settings_check() -> None:
    with pytest.raises(ConfigError) as refused:
        DedupeConfig.from_settings(Settings({"CRAWL_DEDUPE_PARTS": 0})).validate()
    assert str(refused.value) == (
        "CRAWL_DEDUPE_PARTS=0: the one-tag layout was removed (issue 42); "
        "a power of 2 from 1 to 128"
    )


async def test_a_worker_refuses_the_one_tag_index_naming_the_command(old: Redis) -> None:
    index = worker_index(old)
    with pytest.raises(DedupeMismatch) as refused:
        await index.verify()
    assert MIGRATE_HINT in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(DedupeMismatch, match=MIGRATE_HINT):
        await index.check_and_add(bytes(20), 1, "http://a.test/", "a.test")
    assert await dump_keys(old) == fixture()["keys"]  # nothing written


def test_a_worker_stops_before_its_first_page(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=4, links=2, cross_links=0, query_variants=0)
    with sync_redis.Redis.from_url(redis_url) as client:
        asyncio.run(restore(redis_url))
        log = tmp_path / "worker.log"
        out = tmp_path / "items.jsonl"
        settings = {"CRAWL_IDLE_CLOSE_SECONDS": 2, "CRAWL_HOST_DELAY": 0.02, "LOG_LEVEL": "INFO"}
        proc = start_worker(
            REPO_ROOT, redis_url, "old", web.seeds, settings, log, extra_args=["-O", str(out)]
        )
        (code,) = wait_all([proc], timeout=120, check=False)
        text = log.read_text()
        assert code == 1
        stops = [line for line in text.splitlines() if MIGRATE_HINT in line]
        assert len(stops) == 1 and "ERROR" in stops[0] and "Not crawling: " in stops[0], stops
        assert "Traceback" not in text
        assert not out.exists() or out.read_text() == ""
        assert client.hgetall(KEYS.dedupe_config) == {
            bytes.fromhex(f): bytes.fromhex(v)
            for f, v in fixture()["keys"][KEYS.dedupe_config.encode().hex()]["value"].items()
        }
