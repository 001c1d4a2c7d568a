"""DNS (issue 5, item 6): the caching resolver and the middleware that parks dead hosts.

In memory first (a stub system lookup, a fake clock, a stub frontier), then real
crawls whose seeds include a host name that does not resolve (``.invalid``,
RFC 6761), next to loopback hosts given as IP literals.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from scrapy import Request
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
)
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError, TimeoutError
from twisted.python.failure import Failure

import middlewares.dns as dns_middleware
from crawlproject import settings as project_settings
from crawlproject.dns.resolver import CachingResolver, DnsConfig, TtlLru
from crawlproject.frontier.basics.urls import host_key
from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from middlewares.dns import DnsFailureMiddleware
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, page_counts

RESOLVER = "crawlproject.dns.resolver.CachingResolver"
MIDDLEWARE = "middlewares.dns.DnsFailureMiddleware"
ORDER = 540  # below RetryMiddleware (550): sees a failure once retries gave up
DEAD = "nx-1.invalid"


# -- the cache ---------------------------------------------------------------------------


def test_ttl_lru_expires_and_drops_the_least_recently_used() -> None:
    cache: TtlLru[str] = TtlLru(size=2, ttl_seconds=10)
    cache.put("a", "1", now=0)
    cache.put("b", "2", now=1)
    assert cache.get("a", now=5) == "1"  # a is now the most recently used
    cache.put("c", "3", now=6)
    assert "b" not in cache and len(cache) == 2
    assert cache.get("a", now=9.9) == "1"
    assert cache.get("a", now=10) is None  # stored at 0, valid for 10 s
    assert "a" not in cache  # an expired entry is dropped when met
    assert cache.get("c", now=15) == "3"
    cache.discard("c")
    assert cache.get("c", now=15) is None


@pytest.mark.parametrize(("size", "ttl"), [(0, 10), (10, 0)])
def test_ttl_lru_off(size: int, ttl: float) -> None:
    cache: TtlLru[str] = TtlLru(size, ttl)
    cache.put("a", "1", now=0)
    assert not cache.enabled and cache.get("a", now=0) is None and len(cache) == 0


# -- the resolver, with a stub system lookup ----------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class StubLookup:
    """The system resolver: answers from ``table`` (a missing name fails), or,
    with ``hold``, leaves each lookup pending in ``pending`` for the test to fire."""

    def __init__(self, table: dict[str, str] | None = None, hold: bool = False) -> None:
        self.table = table or {}
        self.hold = hold
        self.calls: list[tuple[str, float]] = []
        self.pending: list[Deferred[str]] = []

    def __call__(self, name: str, timeout: float) -> Deferred[str]:
        self.calls.append((name, timeout))
        if self.hold:
            self.pending.append(Deferred())
            return self.pending[-1]
        if name in self.table:
            return defer.succeed(self.table[name])
        return defer.fail(
            DNSLookupError(f"address {name!r} not found: [Errno -2] Name or service not known")
        )


class Stats:
    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] += count


def config(**overrides: Any) -> DnsConfig:
    return replace(DnsConfig.from_settings(Settings()), **overrides)


def make_resolver(
    lookup: StubLookup, clock: Clock | None = None, **overrides: Any
) -> tuple[CachingResolver, Stats]:
    resolver = CachingResolver(
        SimpleNamespace(), config(**overrides), lookup=lookup, clock=clock or Clock()
    )
    stats = Stats()
    resolver.attach_stats(stats)  # type: ignore[arg-type]
    return resolver, stats


def result_of(d: Deferred[str]) -> str | Failure:
    out: list[str | Failure] = []
    d.addBoth(out.append)
    assert out, "the Deferred has not fired"
    return out[0]


def test_defaults_are_sized_for_a_whole_web_worker() -> None:
    c = DnsConfig.from_settings(Settings())
    assert c.cache_size == 100_000 > Settings().getint("DNSCACHE_SIZE")
    assert (c.cache_ttl_seconds, c.negative_ttl_seconds, c.park_after) == (3600, 300, 3)
    assert c.timeout_seconds == Settings().getfloat("DNS_TIMEOUT")
    # The project settings carry the same defaults.
    assert project_settings.CRAWL_DNS_NEGATIVE_TTL_SECONDS == 300


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("CRAWL_DNS_CACHE_SIZE", -1, "CRAWL_DNS_CACHE_SIZE"),
        ("CRAWL_DNS_NEGATIVE_CACHE_SIZE", -1, "CRAWL_DNS_NEGATIVE_CACHE_SIZE"),
        ("CRAWL_DNS_NEGATIVE_TTL_SECONDS", -5, "CRAWL_DNS_NEGATIVE_TTL_SECONDS"),
        ("CRAWL_DNS_PARK_AFTER", -1, "CRAWL_DNS_PARK_AFTER"),
        ("CRAWL_CONNECT_PARK_AFTER", -1, "CRAWL_CONNECT_PARK_AFTER"),
        ("DNS_TIMEOUT", 0, "DNS_TIMEOUT"),
    ],
)
def test_bad_settings_fail_clearly(setting: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DnsConfig.from_settings(Settings({setting: value}))


def test_a_resolved_name_is_cached_until_its_ttl() -> None:
    lookup = StubLookup({"a.example": "192.0.2.1"})
    clock = Clock()
    resolver, stats = make_resolver(lookup, clock, cache_ttl_seconds=60, timeout_seconds=7)
    assert result_of(resolver.getHostByName("a.example")) == "192.0.2.1"
    # Names are case-insensitive, and "a.example." is the same name.
    assert result_of(resolver.getHostByName("A.Example.")) == "192.0.2.1"
    assert lookup.calls == [("a.example", 7)]  # DNS_TIMEOUT bounds the system lookup
    clock.now += 60
    lookup.table["a.example"] = "192.0.2.2"  # the site moved
    assert result_of(resolver.getHostByName("a.example")) == "192.0.2.2"
    assert len(lookup.calls) == 2
    assert stats.values == {"dns/lookups": 2, "dns/cache_hits": 1}


def test_a_failed_name_fails_at_once_until_its_negative_ttl() -> None:
    lookup = StubLookup()
    clock = Clock()
    resolver, stats = make_resolver(lookup, clock, negative_ttl_seconds=300)
    first = result_of(resolver.getHostByName(DEAD))
    assert isinstance(first, Failure) and first.check(DNSLookupError)
    for _ in range(5):
        again = result_of(resolver.getHostByName(DEAD))
        assert isinstance(again, Failure) and again.check(DNSLookupError)
        clock.now += 10
    assert "Name or service not known" in again.getErrorMessage()
    assert "(cached)" in again.getErrorMessage()
    assert len(lookup.calls) == 1  # the system resolver was asked once, not per URL
    clock.now += 300
    lookup.table[DEAD] = "192.0.2.9"  # it came back
    assert result_of(resolver.getHostByName(DEAD)) == "192.0.2.9"
    assert stats.values == {
        "dns/lookups": 2,
        "dns/failures": 1,
        "dns/negative_hits": 5,
    }


def test_the_negative_cache_is_bounded() -> None:
    lookup = StubLookup()
    resolver, _ = make_resolver(lookup, negative_cache_size=2)
    for name in ("a.invalid", "b.invalid", "c.invalid", "b.invalid", "a.invalid"):
        result_of(resolver.getHostByName(name))
    # a was dropped (least recently used) when c came, so it was looked up again.
    assert [n for n, _ in lookup.calls] == ["a.invalid", "b.invalid", "c.invalid", "a.invalid"]


def test_the_positive_cache_is_bounded() -> None:
    lookup = StubLookup({f"h{i}.example": f"192.0.2.{i}" for i in range(5)})
    resolver, _ = make_resolver(lookup, cache_size=3)
    for i in (0, 1, 2, 3, 0):
        result_of(resolver.getHostByName(f"h{i}.example"))
    assert len(lookup.calls) == 5  # h0 was dropped for h3


def test_ip_literals_bypass_everything() -> None:
    lookup = StubLookup()
    resolver, stats = make_resolver(lookup)
    for ip in ("127.0.3.1", "::1", "2001:db8::7"):
        assert result_of(resolver.getHostByName(ip)) == ip
    assert lookup.calls == [] and stats.values == {}


def test_dnscache_enabled_off_turns_both_caches_off() -> None:
    lookup = StubLookup({"a.example": "192.0.2.1"})
    resolver, _ = make_resolver(lookup, cache_enabled=False)
    for _ in range(2):
        result_of(resolver.getHostByName("a.example"))
        result_of(resolver.getHostByName(DEAD))
    assert len(lookup.calls) == 4


def test_concurrent_lookups_of_a_name_share_one_system_lookup() -> None:
    lookup = StubLookup(hold=True)
    resolver, stats = make_resolver(lookup)
    first, second, cancelled = (resolver.getHostByName("a.example") for _ in range(3))
    cancelled.addErrback(lambda f: None)
    cancelled.cancel()  # a caller that gave up must not break the others
    assert len(lookup.calls) == 1 and not first.called
    lookup.pending[0].callback("192.0.2.1")
    assert result_of(first) == result_of(second) == "192.0.2.1"
    assert stats.values["dns/coalesced"] == 2
    # Failures reach every waiter too, and are cached.
    a, b = resolver.getHostByName(DEAD), resolver.getHostByName(DEAD)
    lookup.pending[1].errback(DNSLookupError("address 'nx-1.invalid' not found: timeout error"))
    assert all(isinstance(result_of(d), Failure) for d in (a, b))
    c = result_of(resolver.getHostByName(DEAD))
    assert isinstance(c, Failure) and "timeout error (cached)" in c.getErrorMessage()
    assert len(lookup.calls) == 2


def test_an_unexpected_error_is_passed_on_and_not_cached() -> None:
    lookup = StubLookup(hold=True)
    resolver, _ = make_resolver(lookup)
    d = resolver.getHostByName("a.example")
    lookup.pending[0].errback(TimeoutError("not a DNS error"))
    failure = result_of(d)
    assert isinstance(failure, Failure) and failure.check(TimeoutError)
    resolver.getHostByName("a.example")
    assert len(lookup.calls) == 2

    def raising(name: str, timeout: float) -> Deferred[str]:
        raise RuntimeError("broken lookup")

    broken = CachingResolver(SimpleNamespace(), config(), lookup=raising)
    failure = result_of(broken.getHostByName("b.example"))
    assert isinstance(failure, Failure) and failure.check(RuntimeError)
    failure = result_of(broken.getHostByName("b.example"))  # nothing left pending
    assert isinstance(failure, Failure) and failure.check(RuntimeError)


def test_stats_detach_and_instances_share_nothing() -> None:
    lookup = StubLookup({"a.example": "192.0.2.1"})
    one, stats = make_resolver(lookup)
    two, _ = make_resolver(lookup)
    result_of(one.getHostByName("a.example"))
    result_of(two.getHostByName("a.example"))  # not in one's cache: its own lookup
    assert len(lookup.calls) == 2
    one.detach_stats(stats)  # type: ignore[arg-type]
    result_of(one.getHostByName("a.example"))
    assert stats.values == {"dns/lookups": 1}


def test_built_and_installed_like_scrapys_resolver() -> None:
    installed: list[object] = []
    reactor = SimpleNamespace(installResolver=installed.append)
    holder = SimpleNamespace(settings=Settings({"CRAWL_DNS_CACHE_SIZE": 7, "DNS_TIMEOUT": 5}))
    resolver = CachingResolver.from_crawler(holder, reactor)  # type: ignore[arg-type]
    assert (resolver.config.cache_size, resolver.config.timeout_seconds) == (7, 5)
    resolver.install_on_reactor()
    assert installed == [resolver]


# -- the middleware, with a stub frontier ---------------------------------------------------


class StubFrontier:
    def __init__(self) -> None:
        self.parked: list[str] = []
        self.reasons: dict[str, str] = {}
        self.fail = False

    async def park_host(self, pkey: str, reason: str = "parked") -> int:
        if self.fail:
            raise RedisConnectionError("Redis went away")
        self.parked.append(pkey)
        self.reasons[pkey] = reason
        return 4


class StubScheduler(FrontierScheduler):
    def __init__(self) -> None:  # no Redis: only what the middleware uses
        self.frontier = StubFrontier()  # type: ignore[assignment]

    def politeness_key(self, url: str) -> str:
        return host_key(url)


def make_middleware(park_after: int = 3) -> tuple[DnsFailureMiddleware, StubFrontier]:
    crawler = get_crawler(
        settings_dict={
            "SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler",
            "CRAWL_DNS_PARK_AFTER": park_after,
        }
    )
    mw = DnsFailureMiddleware.from_crawler(crawler)
    scheduler = StubScheduler()
    crawler.engine = SimpleNamespace(scheduler=scheduler)  # type: ignore[assignment]
    return mw, scheduler.frontier  # type: ignore[return-value]


def failed(url: str) -> CannotResolveHostError:
    return CannotResolveHostError(f"DNS lookup failed: {url}")


async def test_a_host_is_parked_after_n_dns_failures_in_a_row(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mw, frontier = make_middleware(park_after=3)
    dead = "http://nx-1.invalid"
    for i in range(2):
        await mw.process_exception(Request(f"{dead}/{i}"), failed(dead))
    # A response resets the count: the name resolves.
    url = f"{dead}/ok"
    mw.process_response(Request(url), HtmlResponse(url, body=b""))
    await mw.process_exception(Request(f"{dead}/a"), DNSLookupError("old handlers"))
    await mw.process_exception(Request(f"{dead}/b"), ConnectionRefusedError())  # not DNS
    await mw.process_exception(Request(f"{dead}/c"), failed(dead))
    assert frontier.parked == []
    # Another host's failures are its own.
    await mw.process_exception(Request("http://other.invalid/"), failed("other"))
    with caplog.at_level(logging.WARNING, logger="middlewares.dns"):
        await mw.process_exception(Request(f"{dead}/d"), failed(dead))
        assert frontier.parked == ["nx-1.invalid"]  # its politeness key
        for i in range(5):  # URLs still in flight fail too: parked once, logged once
            await mw.process_exception(Request(f"{dead}/late{i}"), failed(dead))
    assert frontier.parked == ["nx-1.invalid"]
    warnings = [r for r in caplog.records if r.name == "middlewares.dns"]
    assert len(warnings) == 1 and "nx-1.invalid" in warnings[0].getMessage()
    stats = mw.stats.get_stats()
    assert stats["dns/lookup_failed"] == 2 + 1 + 1 + 1 + 1 + 5
    assert (stats["dns/parked_hosts"], stats["dns/parked_urls"]) == (1, 4)


async def test_a_redis_error_while_parking_is_retried_on_the_next_failure() -> None:
    mw, frontier = make_middleware(park_after=1)
    frontier.fail = True
    await mw.process_exception(Request("http://nx-1.invalid/1"), failed("x"))
    assert mw.stats.get_value("dns/park_errors") == 1
    frontier.fail = False
    await mw.process_exception(Request("http://nx-1.invalid/2"), failed("x"))
    assert frontier.parked == ["nx-1.invalid"]


async def test_without_parking_it_only_counts() -> None:
    mw, frontier = make_middleware(park_after=0)
    for i in range(5):
        await mw.process_exception(Request(f"http://nx-1.invalid/{i}"), failed("x"))
    assert frontier.parked == [] and mw.stats.get_value("dns/lookup_failed") == 5
    plain = get_crawler(settings_dict={"SCHEDULER": "scrapy.core.scheduler.Scheduler"})
    mw = DnsFailureMiddleware.from_crawler(plain)  # no frontier: nothing to park in
    assert not mw.park
    await mw.process_exception(Request("http://nx-1.invalid/"), failed("x"))
    assert mw.stats.get_value("dns/lookup_failed") == 1


async def test_refused_and_timed_out_connections_park_with_their_reason() -> None:
    mw, frontier = make_middleware(park_after=3)
    refused, slow = "http://127.0.2.9:1", "http://slow.example"
    for i in range(2):
        await mw.process_exception(Request(f"{refused}/{i}"), DownloadConnectionRefusedError())
        await mw.process_exception(Request(f"{slow}/{i}"), DownloadTimeoutError("took long"))
    url = f"{slow}/ok"
    mw.process_response(Request(url), HtmlResponse(url, body=b""))  # it answered: reset
    await mw.process_exception(Request(f"{slow}/2"), TimeoutError())
    await mw.process_exception(Request(f"{refused}/x"), ValueError("not a connection"))
    assert frontier.parked == []
    await mw.process_exception(Request(f"{refused}/2"), DownloadConnectionRefusedError())
    await mw.process_exception(Request(f"{slow}/3"), DownloadTimeoutError("took long"))
    assert frontier.parked == ["127.0.2.9:1"]
    await mw.process_exception(Request(f"{slow}/4"), DownloadTimeoutError("took long"))
    assert frontier.reasons == {"127.0.2.9:1": "connection_refused", "slow.example": "timeout"}
    stats = mw.stats.get_stats()
    assert (stats["connect/refused"], stats["connect/timeout"]) == (3, 5)
    assert (stats["connect/parked_hosts"], stats["connect/parked_urls"]) == (2, 8)
    assert "dns/lookup_failed" not in stats


async def test_connect_parking_has_its_own_switch() -> None:
    crawler = get_crawler(
        settings_dict={
            "SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler",
            "CRAWL_DNS_PARK_AFTER": 3,
            "CRAWL_CONNECT_PARK_AFTER": 0,
        }
    )
    mw = DnsFailureMiddleware.from_crawler(crawler)
    scheduler = StubScheduler()
    crawler.engine = SimpleNamespace(scheduler=scheduler)  # type: ignore[assignment]
    for i in range(5):
        await mw.process_exception(
            Request(f"http://127.0.2.9:1/{i}"), DownloadConnectionRefusedError()
        )
    assert scheduler.frontier.parked == []  # type: ignore[attr-defined]
    assert mw.stats.get_value("connect/refused") == 5


async def test_per_process_state_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dns_middleware, "TRACKED_HOSTS_MAX", 5)
    mw, frontier = make_middleware(park_after=2)
    for i in range(50):
        await mw.process_exception(Request(f"http://nx-{i}.invalid/"), failed("x"))
        url = f"http://127.0.3.{i + 1}/"
        mw.process_response(Request(url), HtmlResponse(url, body=b""))
    assert len(mw._streaks) <= 5 and len(mw._keys) <= 5
    # The oldest streaks were dropped: a second failure of nx-0 starts again.
    await mw.process_exception(Request("http://nx-0.invalid/"), failed("x"))
    await mw.process_exception(Request("http://nx-49.invalid/"), failed("x"))
    assert frontier.parked == ["nx-49.invalid"]


async def test_failures_without_an_answer_never_park(monkeypatch: pytest.MonkeyPatch) -> None:
    """EAI_AGAIN (SERVFAIL, unreachable servers) and timeouts: maybe this worker's
    resolver is down; parking is fleet-wide, so only "no such name" counts."""

    class Outage(StubLookup):
        def __call__(self, name: str, timeout: float) -> Deferred[str]:
            self.calls.append((name, timeout))
            reason = {
                "down.example": "[Errno -3] Temporary failure in name resolution",
                "slow.example": "timeout error",
            }.get(name, "[Errno -2] Name or service not known")
            return defer.fail(DNSLookupError(f"address {name!r} not found: {reason}"))

    resolver, _ = make_resolver(Outage())
    monkeypatch.setattr(dns_middleware, "_installed_resolver", lambda: resolver)
    mw, frontier = make_middleware(park_after=2)
    mw._attach_resolver_stats()  # what the engine_started signal does
    for name in ("down.example", "slow.example", "nx-1.invalid"):
        for i in range(4):
            result_of(resolver.getHostByName(name))  # the download's lookup
            await mw.process_exception(Request(f"http://{name}/{i}"), failed(name))
    assert frontier.parked == ["nx-1.invalid"]
    stats = mw.stats.get_stats()
    assert stats["dns/lookup_failed"] == 12
    assert stats["dns/lookup_failed_temporary"] == 8
    # The resolver counts into the crawler's stats once attached.
    assert (stats["dns/lookups"], stats["dns/negative_hits"]) == (3, 9)
    assert resolver.failure_reason("DOWN.example.") == (
        "[Errno -3] Temporary failure in name resolution"
    )
    assert resolver.failure_reason("a.example") is None


# -- real crawls ------------------------------------------------------------------------------


def _fails_fast(name: str) -> float | None:
    """Seconds the system resolver takes to fail ``name``; None if it resolves."""
    start = time.monotonic()
    try:
        socket.getaddrinfo(name, 80)
    except OSError:
        return time.monotonic() - start
    return None


@pytest.fixture(scope="module")
def dead_name() -> str:
    took = _fails_fast(DEAD)
    if took is None:
        pytest.skip(f"{DEAD} resolves on this machine (a resolver rewriting NXDOMAIN?)")
    if took > 5:
        pytest.skip(f"the system resolver takes {took:.1f} s to fail {DEAD}")
    return DEAD


@pytest.mark.parametrize("robots", [True, False], ids=["robots-on", "robots-off"])
def test_a_dead_host_is_parked_and_the_rest_is_crawled(
    robots: bool,
    dead_name: str,
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
) -> None:
    web = testweb_factory(hosts=2, pages=5, latency_ms=(1, 5), links=2, cross_links=0)
    dead_host = f"http://{dead_name}"
    dead = [dead_host + "/"] + [f"{dead_host}/p/{i}" for i in range(1, 6)]
    crawl = "dns-robots" if robots else "dns-plain"
    settings = {
        "CRAWL_HOST_DELAY": 0.1,
        "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
        "CRAWL_IDLE_POLL_SECONDS": 0.2,
        "CRAWL_ROBOTS_OBEY": robots,
        # A host whose robots.txt is unreachable is retried quickly.
        "CRAWL_ROBOTS_RETRY_SECONDS": 0.2,
        "CRAWL_ROBOTS_RETRY_MAX_SECONDS": 0.4,
        "CRAWL_DNS_PARK_AFTER": 3,
        "TWISTED_DNS_RESOLVER": RESOLVER,
        "DOWNLOADER_MIDDLEWARES": {**project_settings.DOWNLOADER_MIDDLEWARES, MIDDLEWARE: ORDER},
    }
    proc = start_worker(
        REPO_ROOT, redis_server.url, crawl, web.seeds + dead, settings, tmp_path / f"{crawl}.log"
    )
    wait_all([proc], timeout=120)
    log = proc.log_path.read_text()
    assert "Spider closed (finished)" in log
    stats = stats_of(proc.log_path)

    # The real hosts (IP literals: no lookup) are crawled in full.
    assert set(page_counts(web.log)) == web.expected_urls
    assert all(n == 1 for n in page_counts(web.log).values())

    # Three fetches in a row failed (robots on: the host's robots.txt, before any
    # page; off: three pages, each after Scrapy's two retries), then the host
    # was parked, once.
    assert stats["dns/lookup_failed"] == 3
    assert stats["dns/parked_hosts"] == 1
    assert log.count("[middlewares.dns] WARNING") == 1
    attempts = stats["downloader/exception_type_count/scrapy.exceptions.CannotResolveHostError"]
    if robots:
        assert attempts == stats["robotstxt/exception_count/CannotResolveHostError"] == 3
        assert stats["dns/parked_urls"] == len(dead) - 1  # all but the one in flight
    else:
        # Each attempt was retried or given up on; three were given up on.
        assert stats["retry/max_reached"] == 3
        assert attempts == stats["retry/count"] + 3
        assert stats["dns/parked_urls"] == len(dead) - 3

    # The system resolver was asked once for the whole crawl, not once per
    # fetch: when the first URL was claimed (for its address, the address
    # cap's question); every download failed from the negative cache.
    assert stats["dns/lookups"] == stats["dns/failures"] == 1
    assert stats["dns/negative_hits"] == attempts
    assert stats["frontier/address_unresolved"] >= 1  # fetched without a place, as it failed
    assert "dns/cache_hits" not in stats  # loopback hosts are IP literals

    # The operator sees the parked URLs, per host, and can put them back.
    cli = [sys.executable, "-m", "crawlproject", "--redis-url", redis_server.url]
    cli += ["--crawl", crawl]
    shown = subprocess.run([*cli, "parked"], cwd=REPO_ROOT, check=True, capture_output=True)
    if robots:
        # The URL whose slot fetched robots.txt is parked too (by the robots.txt
        # middleware, for the same reason): none of the host's URLs is lost.
        assert stats["robotstxt/parked_hosts"] == 1
        assert json.loads(shown.stdout) == {dead_name: len(dead)}
    else:
        assert json.loads(shown.stdout) == {dead_name: stats["dns/parked_urls"]}
