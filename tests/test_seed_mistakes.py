"""Seed mistakes (issue 41, items 3 and 4): a seed the crawler cannot fetch
as written is one WARNING and a count (``seeds/refused``), and every other
seed is crawled, wherever it sits in the list and wherever seeds come from;
a seed the guard refused is not marked seen, so a run that allows it fetches
it. Real crawls on a real Redis and a loopback test web."""

from __future__ import annotations

import calendar
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from crawlproject.frontier.basics.request_meta import SEED_META_KEY
from crawlproject.guard.errors import BlockedAddress
from middlewares.guard import AddressGuardMiddleware
from testkit.crawlproc import (
    LOOPBACK_ALLOW,
    REPO_ROOT,
    WorkerProcess,
    start_worker,
    stats_of,
    wait_all,
)
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, fetches_by_host, page_counts

FAST = {"CRAWL_HOST_DELAY": 0.1, "CRAWL_IDLE_CLOSE_SECONDS": 2, "CRAWL_IDLE_POLL_SECONDS": 0.2}
OWN = {**FAST, "SPIDER_MODULES": "spiders,tests.spiders_for_tests"}
TAIL = "; the other seeds are crawled"
# (bad seed, what the WARNING says of it)
BAD = {
    "http://host:99999/": "impossible port 99999 (a port is 1 to 65535)",
    "ftp://files.example/": "unsupported scheme 'ftp' (only http and https are crawled)",
    "http://[::1/": "malformed URL (Invalid IPv6 URL)",
    "http:///nohost": "no host",
}


def warnings_of(log: Path) -> list[str]:
    """The WARNING lines of a worker's log, without their time and logger
    (Python's warnings about code, py.warnings, are not the crawl's lines)."""
    lines = log.read_text(errors="replace").splitlines()
    found = [re.match(r"^.*? \[([\w.]+)\] WARNING: (.*)$", ln) for ln in lines]
    return [m[2] for m in found if m and m[1] != "py.warnings"]


def line_for(url: str, why: str) -> str:
    return f"Seed {url!r} not crawled: {why}{TAIL}"


def host_of(seed: str) -> str:
    return seed.split("//", 1)[1].split(":", 1)[0]


def test_a_bad_seed_first_in_the_middle_or_last_cancels_no_other(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=6, pages=4, latency_ms=(1, 5), links=2, cross_links=0)
    good = web.seeds
    bad = list(BAD)
    # Three crawls at once, each with two sites of its own and one bad seed:
    # first, in the middle, last.
    orders = {
        "first": [bad[0], good[0], good[1]],
        "middle": [good[2], bad[1], good[3]],
        "last": [good[4], good[5], bad[2]],
    }
    procs: dict[str, WorkerProcess] = {
        name: start_worker(REPO_ROOT, redis_server.url, f"bad-{name}", seeds, FAST,
                           tmp_path / f"{name}.log")
        for name, seeds in orders.items()
    }  # fmt: skip
    assert wait_all(list(procs.values()), timeout=180) == [0, 0, 0]
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls  # every good seed's site, whole
    for name, seeds in orders.items():
        log = procs[name].log_path
        refused = [s for s in seeds if s in BAD]
        assert warnings_of(log) == [line_for(s, BAD[s]) for s in refused], name
        assert stats_of(log)["seeds/refused"] == 1, name


def test_a_spiders_own_start_urls_and_the_seed_list(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=4, pages=3, latency_ms=(1, 5), links=2, cross_links=0)
    s = web.seeds
    # Scrapy's default start() makes a Request of each start URL: one that
    # raises there would end start(), cancelling the start URLs after it.
    own = start_worker(
        REPO_ROOT, redis_server.url, "own", [], OWN, tmp_path / "own.log",
        extra_args=["-a", f"start={s[0]},http://host:99999/,{s[1]}"], spider="tutorial",
    )  # fmt: skip
    # The crawl's <crawl>:start_urls list, scrapy-redis's way (LPUSH, in this order).
    with redis.Redis.from_url(redis_server.url) as client:
        entries = [s[2], "ftp://files.example/", json.dumps({"url": "http:///nohost"}), s[3]]
        client.lpush("listed:start_urls", *entries)
    listed = start_worker(REPO_ROOT, redis_server.url, "listed", [], FAST, tmp_path / "l.log")
    assert wait_all([own, listed], timeout=180) == [0, 0]
    hosts = fetches_by_host(web.log)
    assert all(hosts[host_of(seed)] >= 1 for seed in s), hosts
    assert warnings_of(own.log_path) == [line_for("http://host:99999/", BAD["http://host:99999/"])]
    assert stats_of(own.log_path)["seeds/refused"] == 1
    assert warnings_of(listed.log_path) == [
        line_for("ftp://files.example/", BAD["ftp://files.example/"]),
        line_for("http:///nohost", "no host"),
    ]
    assert stats_of(listed.log_path)["seeds/refused"] == 2


def test_a_seed_the_guard_refused_is_fetched_once_allowed(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=5, latency_ms=(1, 5), links=2, cross_links=0)
    seed = web.seeds[0]
    host = host_of(seed)
    first = start_worker(
        REPO_ROOT, redis_server.url, "guarded", [seed], {**FAST, "CRAWL_GUARD_ALLOW": ""},
        tmp_path / "first.log",
    )  # fmt: skip
    assert wait_all([first], timeout=120) == [0]
    assert web.log == []  # nothing fetched, not even robots.txt
    why = (
        f"{host} is a loopback address, which the guard refuses "
        f"(to crawl it: -s CRAWL_GUARD_ALLOW={host}/32)"
    )
    assert warnings_of(first.log_path) == [line_for(seed, why)]
    assert stats_of(first.log_path)["seeds/refused"] == 1
    # Same crawl, same Redis, the loopback allowed: the seed and its site.
    second = start_worker(REPO_ROOT, redis_server.url, "guarded", [seed], FAST,
                          tmp_path / "second.log")  # fmt: skip
    assert wait_all([second], timeout=120) == [0]
    assert set(page_counts(web.log)) == web.expected_urls
    assert warnings_of(second.log_path) == []


def seed_cli(redis_url: str, crawl: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", crawl]
    return subprocess.run([*cmd, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def test_the_seed_command_says_what_it_did_with_each_url(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=3, pages=3, latency_ms=(1, 5), links=2, cross_links=0)
    a, b, c = web.seeds
    url = redis_server.url
    allow = ["-s", f"CRAWL_GUARD_ALLOW={LOOPBACK_ALLOW}"]
    first = seed_cli(url, "told", *allow, "seed", a, b)
    assert (first.returncode, first.stderr) == (0, "")
    assert first.stdout.splitlines() == [f"queued        {a}", f"queued        {b}"]
    # Crawl "told" tracks its fetches for recrawl (their times are kept);
    # crawl "untold" does not.
    before = int(time.time())
    tracked = {**FAST, "CRAWL_RECRAWL_TRACK": True}
    told = start_worker(REPO_ROOT, url, "told", [], tracked, tmp_path / "told.log")
    untold = start_worker(REPO_ROOT, url, "untold", [b], FAST, tmp_path / "untold.log")
    bloom = {**FAST, "CRAWL_SEEN_FILTER": "bloom", "CRAWL_SEEN_CAPACITY": 100_000}
    bloomy = start_worker(REPO_ROOT, url, "bloomy", [c], bloom, tmp_path / "bloomy.log")
    assert wait_all([told, untold, bloomy], timeout=120) == [0, 0, 0]
    with redis.Redis.from_url(url) as client:
        assert client.llen("told:start_urls") == 0
    again = seed_cli(url, "told", *allow, "seed", a, c, "http://host:99999/", "ftp://x.example/")
    assert again.returncode == 1 and again.stderr == ""
    lines = again.stdout.splitlines()
    assert re.fullmatch(
        rf"already seen  {re.escape(a)} \(last fetched \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)",
        lines[0],
    ), lines
    assert lines[1:] == [
        f"queued        {c}",
        f"refused       http://host:99999/: {BAD['http://host:99999/']}",
        f"refused       ftp://x.example/: {BAD['ftp://files.example/'].replace('files', 'x')}",
    ]
    stamp = re.search(r"last fetched (.*) UTC", lines[0])
    assert (
        stamp and abs(calendar.timegm(time.strptime(stamp[1], "%Y-%m-%d %H:%M:%S")) - before) < 300
    )
    with redis.Redis.from_url(url) as client:
        assert client.lrange("told:start_urls", 0, -1) == [c.encode()]  # only the new one
    unknown = seed_cli(url, "untold", *allow, "seed", b)
    assert (unknown.returncode, unknown.stdout) == (
        0,
        f"already seen  {b} (when is not known: this crawl records fetch times only for "
        "the URLs it tracks for recrawl (CRAWL_RECRAWL_TRACK))\n",
    )
    # A Bloom seen set is read as the workers write it.
    in_bloom = seed_cli(url, "bloomy", *allow, "seed", c, a)
    assert in_bloom.returncode == 0
    assert in_bloom.stdout.splitlines()[0].startswith(f"already seen  {c} (when is not known")
    assert in_bloom.stdout.splitlines()[1] == f"queued        {a}"
    # Without the loopback allowed, the guard's refusal, said before any fetch.
    host = host_of(c)
    refused = seed_cli(url, "told", "seed", c)
    assert refused.returncode == 1
    assert refused.stdout == (
        f"refused       {c}: {host} is a loopback address, which the guard refuses "
        f"(to crawl it: -s CRAWL_GUARD_ALLOW={host}/32)\n"
    )


def test_a_seed_whose_name_the_guard_refuses_at_its_fetch_is_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A host name that resolves to a refused address is only known at the
    fetch: a seed there is a WARNING that says it stays seen, and how to
    start over; a link there stays the guard's INFO line."""
    crawler = get_crawler(Spider, {"CRAWL_GUARD_ALLOW": ""})
    guard = AddressGuardMiddleware.from_crawler(crawler)
    seed = Request("http://intranet.example/", meta={SEED_META_KEY: True})
    link = Request("http://intranet.example/page")
    with caplog.at_level(logging.INFO, logger="middlewares.guard"):
        for request in (seed, link):
            guard.process_exception(request, BlockedAddress("intranet.example", "private"))
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "WARNING",
            "Seed 'http://intranet.example/' not crawled: intranet.example resolves to a "
            "private address, which the guard refuses (to crawl it: "
            "CRAWL_GUARD_ALLOW=intranet.example or its network; this crawl keeps it as "
            "seen: start over with crawlproject reset, or use another crawl name)",
        ),
        (
            "INFO",
            "Guard: not fetching http://intranet.example/page: intranet.example is a "
            "private address (CRAWL_GUARD_ALLOW)",
        ),
    ]
    assert crawler.stats is not None
    assert crawler.stats.get_value("seeds/refused") == 1
    assert crawler.stats.get_value("guard/blocked") == 2
