"""Politeness per server, the pure parts: host keys of servers, the address
settings (caps, CIDR overrides, conflicts refused with one line), the static
host-to-address map in the resolver, and the host-key form a crawl records."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy.settings import Settings
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from crawlproject.dns.resolver import CachingResolver, DnsConfig, read_host_addresses
from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.crawl.address_settings import AddressConfig, normal_address
from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.store.host_keys import adopt_host_keys
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import FrontierMismatch
from crawlproject.guard.errors import BlockedAddressError
from crawlproject.guard.policy import GuardPolicy

CANON = UrlCanonicalizer([])


def project(**kw: Any) -> Settings:
    s = Settings()
    s.setmodule("crawlproject.settings", priority="project")
    s.setdict(kw, priority="cmdline")
    return s


def key(url: str) -> str:
    return host_key(CANON.canonicalize(url))


def test_a_host_key_is_the_server() -> None:
    # http and https of one host on their default ports: one server.
    assert key("http://A.example/x") == key("https://a.example:443/") == "a.example"
    assert key("http://a.example:443/") == "a.example"
    # Any other port is another server, whatever the scheme.
    assert key("http://a.example:8080/") == key("https://a.example:8080/") == "a.example:8080"
    assert key("http://[2001:db8::1]/") == key("https://[2001:db8::1]/") == "[2001:db8::1]"
    assert key("http://[2001:db8::1]:8080/") == "[2001:db8::1]:8080"


def test_address_defaults_cap_every_address_at_four() -> None:
    c = AddressConfig.from_settings(project())
    assert c.enabled and not c.by_address and c.base_cap == 4
    assert c.cap_of("192.0.2.7") == c.cap_of("2001:db8::1") == 4
    assert FrontierConfig.from_settings(project()).addresses == c


def test_overrides_most_specific_network_first() -> None:
    c = AddressConfig.from_settings(
        project(
            CRAWL_ADDRESS_OVERRIDES={
                "104.16.0.0/13": None,  # a CDN: no cap
                "104.16.5.0/24": 8,
                "192.0.2.7": "none",
                "198.51.100.0/24": 0,
                "2606:4700::/32": "16",
            }
        )
    )
    assert c.cap_of("104.17.1.1") is None
    assert c.cap_of("104.16.5.9") == 8  # the /24 inside the /13 wins
    assert c.cap_of("192.0.2.7") is None and c.cap_of("192.0.2.8") == 4
    assert c.cap_of("198.51.100.3") is None
    assert c.cap_of("2606:4700::6810:1") == 16
    assert c.cap_of("10.0.0.1") == 4


def test_no_cap_but_for_the_networks_named() -> None:
    off = AddressConfig.from_settings(project(CRAWL_ADDRESS_CONCURRENCY=0))
    assert not off.enabled and off.cap_of("192.0.2.1") is None
    some = AddressConfig.from_settings(
        project(CRAWL_ADDRESS_CONCURRENCY=0, CRAWL_ADDRESS_OVERRIDES={"192.0.2.0/24": 2})
    )
    assert some.enabled
    assert (some.cap_of("192.0.2.1"), some.cap_of("198.51.100.1")) == (2, None)


def test_address_mode_keeps_the_slot_per_address() -> None:
    c = AddressConfig.from_settings(project(CRAWL_POLITENESS_KEY="address"))
    assert c.by_address and c.cap_of("192.0.2.1") == 1
    two = AddressConfig.from_settings(
        project(CRAWL_POLITENESS_KEY="address", CRAWL_HOST_CONCURRENCY=2)
    )
    assert two.cap_of("192.0.2.1") == 2
    config = FrontierConfig.from_settings(project(CRAWL_POLITENESS_KEY="address"))
    assert config.politeness_key == "host"  # its queues are per host
    assert config.addresses.by_address


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"CRAWL_ADDRESS_OVERRIDES": {"104.16.0.1/13": 4}}, "not a network in CIDR form"),
        ({"CRAWL_ADDRESS_OVERRIDES": {"cdn.example": 4}}, "not a network in CIDR form"),
        ({"CRAWL_ADDRESS_OVERRIDES": {"10.0.0.0/8": -1}}, r"must be >= 0"),
        ({"CRAWL_ADDRESS_OVERRIDES": {"10.0.0.0/8": "many"}}, "number of places or 'none'"),
        ({"CRAWL_ADDRESS_OVERRIDES": {"10.0.0.0/8": True}}, "number of places or 'none'"),
        ({"CRAWL_ADDRESS_CONCURRENCY": -1}, "must be >= 0"),
        ({"CRAWL_ADDRESS_CONCURRENCY": 1, "CRAWL_HOST_CONCURRENCY": 2}, "below CRAWL_HOST_CONC"),
        ({"CRAWL_POLITENESS_KEY": "address", "CRAWL_ADDRESS_CONCURRENCY": 0}, "leave it unset"),
        ({"CRAWL_POLITENESS_KEY": "address", "CRAWL_ADDRESS_CONCURRENCY": 8}, "leave it unset"),
        ({"CRAWL_POLITENESS_KEY": "ip"}, "'host', 'domain' or 'address'"),
    ],
)
def test_bad_address_settings_stop_the_worker_with_one_line(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        FrontierConfig.from_settings(project(**settings))
    assert "\n" not in str(info.value)


def test_normal_address() -> None:
    assert normal_address("::ffff:192.0.2.7") == "192.0.2.7"
    assert normal_address("[2001:DB8::1]") == "2001:db8::1"
    assert normal_address("a.example") is None


# -- the static map, in the resolver ----------------------------------------------------


class Stats:
    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] += count


def outcome(d: Deferred[str]) -> str | Failure:
    out: list[str | Failure] = []
    d.addBoth(out.append)
    assert out
    return out[0]


def test_pinned_names_resolve_from_the_map_and_the_guard_still_applies() -> None:
    lookups: list[str] = []

    def lookup(name: str, timeout: float) -> Deferred[str]:
        lookups.append(name)
        return defer.succeed("151.101.1.69")

    pins = {"A.test.": "93.184.215.14", "b.test": "10.0.0.1"}
    settings = Settings({"CRAWL_HOST_ADDRESSES": pins})
    config = DnsConfig.from_settings(settings)
    assert config.host_addresses == {"a.test": "93.184.215.14", "b.test": "10.0.0.1"}
    resolver = CachingResolver(
        SimpleNamespace(),  # type: ignore[arg-type]
        config,
        lookup=lookup,
        guard=GuardPolicy.from_values(True, []),
    )
    stats = Stats()
    resolver.attach_stats(stats)  # type: ignore[arg-type]
    assert outcome(resolver.getHostByName("a.TEST")) == "93.184.215.14"
    refused = outcome(resolver.getHostByName("b.test"))
    assert isinstance(refused, Failure) and refused.check(BlockedAddressError)
    assert lookups == [] and not stats.values  # no lookup, no stats
    # The frontier's question is answered from the same cache, not counted as a download's.
    assert outcome(resolver.address_of("c.test")) == "151.101.1.69"
    assert outcome(resolver.getHostByName("c.test")) == "151.101.1.69"
    assert outcome(resolver.address_of("c.test")) == "151.101.1.69"
    assert lookups == ["c.test"]
    assert stats.values == Counter({"dns/lookups": 1, "dns/cache_hits": 1})


@pytest.mark.parametrize(
    "entry",
    [
        {"http://a.test": "192.0.2.1"},
        {"a.test:80": "192.0.2.1"},
        {"a.test": "a.example"},
        {"192.0.2.1": "192.0.2.2"},
        {"a.test": 3},
    ],
)
def test_bad_host_address_entries_are_refused(entry: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="CRAWL_HOST_ADDRESSES"):
        read_host_addresses(entry)


# -- the crawl's host key form ----------------------------------------------------------


async def test_an_old_crawls_scheme_host_keys_are_refused(redis_url: str) -> None:
    from redis.asyncio import Redis

    redis = Redis.from_url(redis_url)
    try:
        new = CrawlKeys("new", 2)
        await adopt_host_keys(redis, new, "host")
        assert await redis.hget(new.meta, "host_keys") == b"server"
        await adopt_host_keys(redis, new, "address")  # joins it
        old = CrawlKeys("old", 2)
        await redis.hset(old.meta, mapping={"shards": "2", "queue_layout": "bands1"})
        with pytest.raises(FrontierMismatch, match="scheme://host politeness keys") as info:
            await adopt_host_keys(redis, old, "host")
        assert "\n" not in str(info.value)
        await adopt_host_keys(redis, old, "domain")  # a registered domain did not change
    finally:
        await redis.aclose()
