"""``crawlproject dead``: the stored requests workers could not read back are
listed, explained, requeued (not seen-tested again) and dropped, on a real
redis-server with real crawl processes (crawlproject/frontier/crawl/dead.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from scrapy import Request

from crawlproject import default_settings
from crawlproject.frontier.store.codec import RequestCodec, stored_form
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb
from tests.spiders_for_tests.own_spiders import TutorialSpider

FAST = {
    "CRAWL_HOST_DELAY": 0.05,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
}
KEYS = CrawlKeys("tutorial", NEW_CRAWL_SHARDS)


def cli(redis_url: str, *args: str) -> str:
    cmd = [sys.executable, "-m", "crawlproject", "--crawl", "tutorial", "--redis-url", redis_url]
    cmd += ["-s", "SPIDER_MODULES=spiders,tests.spiders_for_tests", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def push_dead(client: redis.Redis, pkey: str, whole: bytes) -> None:
    """What ack.lua writes when a worker acks a claim ``dead``."""
    dead = KEYS.shard_prefixes[KEYS.shard_of(pkey)] + "dead"
    client.rpush(dead, pkey.encode() + b"\t" + stored_form(whole, pkey))


def crawl(redis_url: str, tmp: Path, start: str = "") -> tuple[list[dict[str, Any]], Path]:
    out = tmp / "items.jsonl"
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], FAST, tmp / "w.log",
        extra_args=["-a", f"start={start}", "-O", str(out)], spider="tutorial",
    )  # fmt: skip
    wait_all([proc], timeout=120)
    return [json.loads(line) for line in out.read_text().splitlines()], proc.log_path


def test_dead_requests_are_listed_explained_requeued_and_dropped(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=3, links=1, cross_links=0)
    home = web.base_url(1)
    pkey = home.split("://", 1)[1].rstrip("/")
    crawl(redis_url, tmp_path / "first", start=home)  # the crawl exists; home is seen
    client = redis.Redis.from_url(redis_url)
    spider = TutorialSpider()
    codec = RequestCodec(default_settings.CRAWL_REQUEST_CLASSES)
    # Put there by a worker of an earlier version (a private callback), by a
    # worker whose spider lost a method since, and an entry no one can read.
    readable = Request(home, callback=spider._parse_page, cb_kwargs={"hop": 9})
    push_dead(client, pkey, codec.encode(readable, spider))
    lost = json.dumps({"url": home + "p/2", "callback": "parse_gone"}).encode()
    push_dead(client, pkey, lost)
    push_dead(client, pkey, b"\x01junk")

    listed = json.loads(cli(redis_url, "dead"))
    assert [row["url"] for row in listed] == [home, home + "p/2", None]
    why = [row["why"] for row in json.loads(cli(redis_url, "dead", "--explain"))]
    assert why[0].startswith("decodes now")
    assert "'parse_gone'" in why[1] and "spider 'tutorial'" in why[1]
    assert "not a stored request" in why[2]

    assert cli(redis_url, "dead", "--requeue").startswith("requeued 2 dead request(s); 1 ")
    items, log = crawl(redis_url, tmp_path / "second")
    # Requeued, not seen-tested: the home page is fetched again, by its stored callback.
    again = [(i["url"], i["kind"]) for i in items if i.get("hop") == 9]
    assert again == [(home, "page")]
    assert sum(1 for r in web.log if r.url == home) == 2
    # The one whose method is gone went back to dead at its claim.
    assert stats_of(log)["frontier/undecodable"] == 1
    assert [row["url"] for row in json.loads(cli(redis_url, "dead"))] == [None, home + "p/2"]
    assert cli(redis_url, "dead", "--drop").strip() == "dropped 2 dead request(s)"
    assert json.loads(cli(redis_url, "dead")) == []
