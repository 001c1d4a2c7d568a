"""Politeness per server, whole crawls: real ``scrapy crawl web`` workers, a real
redis-server, and one test server answering for many host names on one
loopback address (testkit/named_web.py; the crawl maps the names there with
CRAWL_HOST_ADDRESSES). The server's log (name, start and end of every request)
is the judge: at most CRAWL_ADDRESS_CONCURRENCY requests in flight to the
address and one per host; with CRAWL_POLITENESS_KEY=address one in flight and
the delay between them; http and https of one host one slot; a killed worker's
places back with its leases; 50 names of one server each in turn.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import (
    REPO_ROOT,
    WorkerProcess,
    crawl_status,
    start_worker,
    stats_of,
    stop_worker,
    wait_all,
    wait_until,
)
from testkit.named_web import (
    Hit,
    NamedWeb,
    min_idle,
    min_start_gap,
    named_webs,
    peak_in_flight,
)
from testkit.redis_tls import make_tls_files

ADDRESS = "127.0.9.1"
DELAY = 0.2


def names(n: int) -> list[str]:
    return [f"h{i:02d}.test" for i in range(1, n + 1)]


@pytest.fixture
def make_web() -> Iterator[Callable[..., NamedWeb]]:
    with named_webs() as make:
        yield make


def crawl(
    redis_url: str,
    crawl_name: str,
    web: NamedWeb,
    tmp_path: Path,
    workers: int = 3,
    seeds: list[str] | None = None,
    **settings: object,
) -> list[WorkerProcess]:
    config = {
        "CRAWL_HOST_DELAY": DELAY,
        "CRAWL_IDLE_CLOSE_SECONDS": 2,
        "CRAWL_IDLE_POLL_SECONDS": 0.2,
        "CRAWL_HOST_ADDRESSES": web.host_addresses(),
        "LOG_LEVEL": "INFO",
        **settings,
    }
    return [
        start_worker(REPO_ROOT, redis_url, crawl_name, seeds or web.seeds(), config,
                     tmp_path / f"{crawl_name}-{i}.log")
        for i in range(workers)
    ]  # fmt: skip


def pages(log: list[Hit]) -> list[Hit]:
    return [h for h in log if h.path != "/robots.txt"]


def assert_every_page_once(web: NamedWeb) -> None:
    fetched = Counter((h.name, h.path) for h in pages(web.log))
    assert set(fetched) == web.expected_pages()
    assert all(n == 1 for n in fetched.values()), {p: n for p, n in fetched.items() if n > 1}


def assert_hosts_polite(log: list[Hit], delay: float) -> None:
    """One request in flight per host (robots.txt included), and the delay
    from the end of one to the start of the next."""
    by_name = peak_in_flight(log, key=lambda h: h.name)
    assert max(by_name.values()) == 1, {n: p for n, p in by_name.items() if p > 1}
    idle = min_idle(log, key=lambda h: h.name)
    assert min(idle.values()) >= delay, {n: i for n, i in idle.items() if i < delay}


def summed(procs: list[WorkerProcess], stat: str) -> int:
    return sum(stats_of(p.log_path).get(stat, 0) for p in procs)


def test_twenty_names_of_one_address_share_its_places(
    redis_url: str, make_web: Callable[..., NamedWeb], tmp_path: Path
) -> None:
    web = make_web(dict.fromkeys(names(20), 8), [ADDRESS], latency=(0.05, 0.1))
    procs = crawl(redis_url, "addr", web, tmp_path, CRAWL_ADDRESS_CONCURRENCY=4)
    wait_all(procs, timeout=180)
    assert_every_page_once(web)
    # Never more than 4 requests in flight to the address, one per host.
    peak = peak_in_flight(web.log, key=lambda h: h.address)[ADDRESS]
    assert 1 <= peak <= 4, peak
    assert_hosts_polite(web.log, DELAY)
    # The cap bound: hosts found the address full and waited for their turn.
    assert summed(procs, "frontier/address_denied") > 0
    assert summed(procs, "frontier/address_woken") > 0
    assert summed(procs, "frontier/address_taken") >= len(web.log)
    # Every place came back, nobody waits.
    status = crawl_status(redis_url, "addr")
    assert status["addresses"]["at_cap"] == [] and status["addresses"]["waited_on"] == []
    assert status["addresses"]["denied"] == summed(procs, "frontier/address_denied")
    if "+cluster" not in redis_url:  # (a cluster's keys are spread over its nodes)
        with redis.Redis.from_url(redis_url) as client:
            assert not client.keys("cp:{addr/*}:al:*") and not client.keys("cp:{addr/*}:aq:*")


def test_address_mode_keeps_the_slot_per_address(
    redis_url: str, make_web: Callable[..., NamedWeb], tmp_path: Path
) -> None:
    """10 names of 8 pages on one address (was 20: the crawl is one request at
    a time, ``delay`` apart, 41 s of a CI run): ten hosts that three workers
    would fetch at once, were the slot per name, are enough to show that it is
    per address (one in flight, the delay between, denials counted)."""
    delay = 0.1
    web = make_web(dict.fromkeys(names(10), 8), [ADDRESS], latency=(0.01, 0.03))
    procs = crawl(
        redis_url, "byaddr", web, tmp_path, CRAWL_POLITENESS_KEY="address", CRAWL_HOST_DELAY=delay
    )
    wait_all(procs, timeout=240)
    assert_every_page_once(web)
    # One request at a time to the address, the delay between them (from the
    # end of one to the start of the next, as per host), whatever the name.
    assert peak_in_flight(web.log, key=lambda h: h.address) == {ADDRESS: 1}
    assert min_start_gap(web.log, key=lambda h: h.address)[ADDRESS] >= delay
    assert min_idle(web.log, key=lambda h: h.address)[ADDRESS] >= delay
    assert summed(procs, "frontier/address_denied") > 0


def test_http_and_https_of_one_host_are_one_slot(
    redis_url: str, make_web: Callable[..., NamedWeb], tmp_path: Path
) -> None:
    tls = make_tls_files(tmp_path / "tls")
    web = make_web(
        {"a.test": 10}, [ADDRESS], latency=(0.1, 0.15),
        tls=(tls.server_cert, tls.server_key), mixed_schemes=True,
    )  # fmt: skip
    seeds = [web.url("a.test", 0, "http"), web.url("a.test", 0, "https")]
    procs = crawl(redis_url, "schemes", web, tmp_path, workers=2, seeds=seeds)
    wait_all(procs, timeout=120)
    fetched = Counter((h.scheme, h.path) for h in pages(web.log))
    assert {scheme for scheme, _ in fetched} == {"http", "https"}
    assert all(n == 1 for n in fetched.values()), fetched
    # robots.txt per origin (RFC 9309), through the one slot of the server.
    robots = Counter(h.scheme for h in web.log if h.path == "/robots.txt")
    assert robots == Counter({"http": 1, "https": 1})
    # Never both schemes (nor any two requests) in flight at once; the delay between.
    assert_hosts_polite(web.log, DELAY)
    assert min_start_gap(web.log, key=lambda h: h.name)["a.test"] >= DELAY


def test_a_killed_workers_places_come_back_with_its_leases(
    redis_url: str, make_web: Callable[..., NamedWeb], tmp_path: Path
) -> None:
    web = make_web(dict.fromkeys(names(8), 6), [ADDRESS], latency=(0.15, 0.25))
    settings: dict[str, object] = {
        "CRAWL_ADDRESS_CONCURRENCY": 2, "CRAWL_LEASE_SECONDS": 3, "CRAWL_HOST_DELAY": 0.1,
    }  # fmt: skip
    (victim,) = crawl(redis_url, "kill", web, tmp_path, workers=1, **settings)
    match = None

    def victim_id() -> bool:
        nonlocal match
        match = re.search(r"worker (\w+),", victim.log_path.read_text())
        return match is not None

    wait_until(victim_id)
    assert match is not None
    fetching = f"f\t{match.group(1)}\t".encode()
    shard_of_address = None
    keys = CrawlKeys("kill", NEW_CRAWL_SHARDS)  # a new crawl's shards
    with redis.Redis.from_url(redis_url) as client:

        def victim_holds_a_place() -> bool:
            nonlocal shard_of_address
            for shard in range(keys.shards):
                tokens = client.zrange(keys.address_places(shard, ADDRESS), 0, -1)
                for token in tokens:
                    lease_shard, lease_id = token.decode().split(":")
                    lease = keys.shard_prefixes[int(lease_shard)] + "lease"
                    record = client.hget(lease, lease_id)
                    if record is not None and record.startswith(fetching):
                        shard_of_address = shard
                        return True
            return False

        wait_until(victim_holds_a_place)
        stop_worker(victim, 9)  # SIGKILL: its leases and places stay behind
        victim.wait()
        killed_at = time.time()
        assert shard_of_address is not None
        held = client.zcard(keys.address_places(shard_of_address, ADDRESS))
        assert held >= 1
        (survivor,) = crawl(redis_url, "kill", web, tmp_path, workers=1, **settings)
        wait_all([survivor], timeout=180)
        # Every place came back: none is held, nobody waits.
        assert client.zcard(keys.address_places(shard_of_address, ADDRESS)) == 0
        assert client.zcard(keys.address_waiting(shard_of_address, ADDRESS)) == 0
    fetched = Counter((h.name, h.path) for h in pages(web.log))
    assert set(fetched) == web.expected_pages(), "pages lost with the killed worker"
    stats = stats_of(survivor.log_path)
    assert stats.get("frontier/leases_reclaimed", 0) >= 1
    # The cap held throughout: the dead worker's places counted until they expired.
    assert peak_in_flight(web.log, key=lambda h: h.address)[ADDRESS] <= 2
    assert_hosts_polite([h for h in web.log if h.start > killed_at], 0.1)


def test_fifty_names_of_one_address_each_get_their_turn(
    redis_url: str, make_web: Callable[..., NamedWeb], tmp_path: Path
) -> None:
    web = make_web(dict.fromkeys(names(50), 3), [ADDRESS], latency=(0.02, 0.04))
    procs = crawl(
        redis_url, "fair", web, tmp_path, workers=2, CRAWL_ADDRESS_CONCURRENCY=2,
        CRAWL_HOST_DELAY=0.1,
    )  # fmt: skip
    wait_all(procs, timeout=240)
    assert_every_page_once(web)
    # No host starved while others drained: every host's first request
    # (robots.txt) came before any host's third.
    by_name: dict[str, list[float]] = {}
    for hit in sorted(web.log, key=lambda h: h.start):
        by_name.setdefault(hit.name, []).append(hit.start)
    last_first = max(starts[0] for starts in by_name.values())
    first_third = min(starts[2] for starts in by_name.values())
    assert last_first < first_third, (last_first, first_third)
    assert peak_in_flight(web.log, key=lambda h: h.address)[ADDRESS] <= 2
