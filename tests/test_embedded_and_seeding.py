"""The embedded default (no REDIS_URL) and adding seeds to a running crawl."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import redis

from testkit.crawlproc import (
    LOOPBACK_ALLOW,
    REPO_ROOT,
    WorkerProcess,
    start_worker,
    stats_of,
    stop_worker,
    tail,
    wait_all,
    wait_until,
)
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, page_counts

FAST = {"CRAWL_HOST_DELAY": 0.2, "CRAWL_IDLE_CLOSE_SECONDS": 2, "CRAWL_IDLE_POLL_SECONDS": 0.2}


def socket_alive(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def test_embedded_redis_is_shared_persisted_and_stopped(
    testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=4, pages=30, latency_ms=(5, 20), links=3, cross_links=1)
    # Until both run, every answer takes 2 s, so that a cannot finish the crawl alone
    # however long b takes to start (on a loaded machine b fetched nothing within 90 s).
    usual_latency = dict(web.latency)
    web.latency.update(dict.fromkeys(usual_latency, 2.0))
    data = tmp_path / "data"
    settings = {**FAST, "CRAWL_HOST_DELAY": 0.5, "CRAWL_DATA_DIR": str(data)}
    sock = data / "redis" / "redis.sock"

    def worker(tag: str) -> WorkerProcess:
        # Its own User-Agent shows in the web's log which worker fetched.
        own = {**settings, "USER_AGENT": f"crawlproject-{tag}"}
        return start_worker(REPO_ROOT, "", "emb", web.seeds, own, tmp_path / f"{tag}.log")

    def log_of(p: WorkerProcess) -> str:
        return p.log_path.read_text(errors="replace")

    def fetched_by(tag: str) -> int:
        return sum(r.headers.get("user-agent") == f"crawlproject-{tag}" for r in web.log)

    a = worker("a")
    # b starts as soon as a's server is up, so both start up at once.
    wait_until(lambda: "Started the embedded Redis" in a.log_path.read_text(errors="replace"))
    b = worker("b")  # joins the server that a started
    # Stopped once b is in the crawl and a has fetched. Not "once b fetched": the worker
    # that claimed the hosts first may keep every host's slot while answers are slow.
    try:
        wait_until(lambda: fetched_by("a") >= 3 and "Frontier open:" in log_of(b), timeout=180)
    except AssertionError:
        raise AssertionError(
            f"a fetched {fetched_by('a')}\n--- a\n{tail(a.log_path)}\n--- b\n{tail(b.log_path)}"
        ) from None
    web.latency.update(usual_latency)
    for p in (a, b):
        stop_worker(p)
    wait_all([a, b], timeout=60)
    assert "Started the embedded Redis" in a.log_path.read_text()
    assert "Joining the embedded Redis" in b.log_path.read_text()
    assert not socket_alive(sock), "the last worker out must stop the embedded Redis"
    assert (data / "redis" / "appendonly.aof").exists() or (
        data / "redis" / "appendonlydir"
    ).exists()
    fetched_before = sum(page_counts(web.log).values())
    assert fetched_before < len(web.expected_urls)

    c = worker("c")  # restarts the server from its files and resumes
    wait_all([c], timeout=120)
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls
    assert all(n == 1 for n in fetched.values()), {u: n for u, n in fetched.items() if n > 1}
    stats = stats_of(c.log_path)
    # Claims: the pages left, plus one per host whose robots.txt it fetched first.
    left = len(web.expected_urls) - fetched_before
    assert stats["frontier/claims"] == left + stats.get("frontier/deferred", 0)
    assert not socket_alive(sock)


def test_seeds_added_while_running(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=3, pages=6, latency_ms=(5, 20), links=3, cross_links=0)
    # The first host's pages past its front page wait until the seeds are in, so
    # the worker is still crawling (not closing when idle) however long the
    # seed commands take on a loaded machine.
    seeded = threading.Event()
    web.hold[web.ips[0]] = lambda path: path in ("/", "/robots.txt") or seeded.is_set()
    url = redis_server.url
    proc = start_worker(
        REPO_ROOT, url, "grow", web.seeds[:1], {**FAST, "CRAWL_IDLE_CLOSE_SECONDS": 4},
        tmp_path / "w.log",
    )  # fmt: skip
    wait_until(lambda: len(web.log) >= 2)
    cli = [sys.executable, "-m", "crawlproject", "--redis-url", url, "--crawl", "grow"]
    cli += ["-s", f"CRAWL_GUARD_ALLOW={LOOPBACK_ALLOW}"]  # as the workers: the web is on loopback
    subprocess.run([*cli, "seed", web.seeds[1]], cwd=REPO_ROOT, check=True)
    # The scrapy-redis way: LPUSH on <crawl>:start_urls, here as a JSON entry.
    entry = json.dumps({"url": web.seeds[2], "meta": {"note": "pushed"}})
    with redis.Redis.from_url(url) as client:
        client.lpush("grow:start_urls", entry, "not a url", '{"broken json')
    seeded.set()
    bad = subprocess.run([*cli, "seed", "ftp://nope/"], cwd=REPO_ROOT, capture_output=True)
    assert bad.returncode == 1 and b"refused       ftp://nope/: unsupported scheme" in bad.stdout
    wait_all([proc], timeout=120)
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls
    assert all(n == 1 for n in fetched.values())
    stats = stats_of(proc.log_path)
    assert stats["frontier/start_urls"] == 4
    assert stats["seeds/refused"] == 2  # not a URL; broken JSON
    counts = subprocess.run([*cli, "counts"], cwd=REPO_ROOT, check=True, capture_output=True)
    parsed = json.loads(counts.stdout)
    assert parsed["queued"] == 0 and parsed["leased"] == 0
    assert parsed["done"] == len(web.expected_urls)
