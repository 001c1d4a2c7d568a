"""The private-address guard against SSRF (issue 9, item 2).

In memory: the policy on a table of addresses, the allowlist, bad settings and
the resolver's refusals. Then real crawls of a loopback test web (allowlisted
for its one host only) whose pages link, and redirect, to 169.254.169.254, to
a server listening on 127.0.0.1 and to ``localhost``: the server must see no
connection at all unless ``localhost`` is allowlisted by name.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from scrapy.exceptions import CannotResolveHostError, IgnoreRequest
from scrapy.settings import Settings
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError
from twisted.python.failure import Failure

from crawlproject import settings as project_settings
from crawlproject.dns.resolver import CachingResolver, DnsConfig
from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.guard.errors import BlockedAddress, BlockedAddressError, refusal_of
from crawlproject.guard.policy import GuardPolicy, is_blocked
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, host_ip, page_counts

EXCEPTIONS = "downloader/exception_type_count/"

# -- the policy ------------------------------------------------------------------------------

BLOCKED = {
    "127.0.0.1": "loopback",
    "127.255.255.254": "loopback",
    "::1": "loopback",
    "169.254.169.254": "link-local",  # cloud instance metadata
    "fe80::1": "link-local",
    "10.0.0.1": "private",
    "10.255.255.255": "private",
    "172.16.0.1": "private",
    "172.31.255.255": "private",
    "192.168.1.1": "private",
    "fc00::1": "private",
    "fd12:3456::1": "private",
    "100.64.0.1": "shared",
    "100.127.255.254": "shared",
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "ff02::1": "multicast",
    "0.0.0.0": "unspecified",
    "0.1.2.3": "unspecified",
    "::": "unspecified",
    "::ffff:127.0.0.1": "loopback (IPv4 127.0.0.1 in IPv6)",
    "::ffff:169.254.169.254": "link-local (IPv4 169.254.169.254 in IPv6)",
    "64:ff9b::a9fe:a9fe": "link-local (IPv4 169.254.169.254 in IPv6)",  # NAT64
    "2002:a00:1::": "private (IPv4 10.0.0.1 in IPv6)",  # 6to4
}
ALLOWED = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1",
           "2001:4860:4860::8888", "2606:4700:4700::1111", "::ffff:8.8.8.8"]  # fmt: skip


@pytest.mark.parametrize(("address", "reason"), BLOCKED.items())
def test_non_public_addresses_are_blocked(address: str, reason: str) -> None:
    assert is_blocked(ipaddress.ip_address(address)) == reason
    assert GuardPolicy().refuses_literal(address) == reason


@pytest.mark.parametrize(
    "address", ["240.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1", "::127.0.0.1"]
)
def test_reserved_and_special_purpose_addresses_are_blocked(address: str) -> None:
    assert is_blocked(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_are_allowed(address: str) -> None:
    assert is_blocked(ipaddress.ip_address(address)) is None
    assert GuardPolicy().refuses_literal(address) is None


def test_the_defaults_refuse_everything_private_and_allow_nothing() -> None:
    policy = GuardPolicy.from_settings(Settings())
    assert policy.enabled and not policy.allows_anything
    assert project_settings.CRAWL_GUARD_ENABLED is True
    assert project_settings.CRAWL_GUARD_ALLOW == []
    mws = project_settings.DOWNLOADER_MIDDLEWARES
    # Before robots.txt (100); the lookup's one above RetryMiddleware (550).
    assert mws["middlewares.guard.AddressGuardMiddleware"] < 100
    assert mws["middlewares.guard.BlockedLookupMiddleware"] > 550


def test_the_allowlist_takes_networks_and_host_names() -> None:
    # As -s CRAWL_GUARD_ALLOW=... gives it: comma-separated.
    settings = Settings({"CRAWL_GUARD_ALLOW": "127.0.3.1, 10.1.0.0/16,fd00::/8,Intranet.Example.,"
                                              "*.corp.example"})  # fmt: skip
    policy = GuardPolicy.from_settings(settings)
    assert policy.describe_allow() == (
        "127.0.3.1/32, 10.1.0.0/16, fd00::/8, intranet.example, *.corp.example"
    )
    assert policy.refuses_literal("127.0.3.1") is None
    assert policy.refuses_literal("127.0.3.2") == "loopback"
    assert policy.refuses_literal("10.1.200.3") is None
    assert policy.refuses_literal("10.2.0.1") == "private"
    assert policy.refuses_literal("[fd00::5]") is None
    assert policy.refuses_literal("::ffff:10.1.0.9") is None  # mapped: the IPv4 network
    assert policy.refuses_literal("intranet.example") is None  # a name: judged once resolved
    # A name allowed by name is not judged on its address.
    assert policy.refuses("intranet.example", "10.9.9.9") is None
    assert policy.refuses("INTRANET.example.", "10.9.9.9") is None
    assert policy.refuses("www.intranet.example", "10.9.9.9") == "private"  # exact only
    assert policy.refuses("a.corp.example", "192.168.0.1") is None
    assert policy.refuses("a.b.corp.example", "192.168.0.1") is None
    assert policy.refuses("corp.example", "192.168.0.1") == "private"  # the suffix itself: no
    assert policy.refuses("evilcorp.example", "192.168.0.1") == "private"
    # Other names resolving into an allowed network pass, elsewhere not.
    assert policy.refuses("a.example", "10.1.0.1") is None
    assert policy.refuses("a.example", "169.254.169.254") == "link-local"
    assert policy.refuses("a.example", "8.8.8.8") is None


def test_an_empty_allowlist_and_the_guard_off() -> None:
    assert not GuardPolicy.from_settings(Settings({"CRAWL_GUARD_ALLOW": ""})).allows_anything
    off = GuardPolicy.from_settings(Settings({"CRAWL_GUARD_ENABLED": "False"}))
    assert off.refuses_literal("127.0.0.1") is None
    assert off.refuses("localhost", "127.0.0.1") is None


@pytest.mark.parametrize(
    "entry",
    ["10.0.0.1/8", "10.0.0.0/33", "300.1.2.3", "10.0.0", "fd00::/129", "localhost:8080",
     "exa mple.com", "*", "*.", "*.-bad-.com", "http://a.example/"],
)  # fmt: skip
def test_bad_allowlist_entries_fail_at_start(entry: str) -> None:
    with pytest.raises(ConfigError, match="CRAWL_GUARD_ALLOW"):
        GuardPolicy.from_settings(Settings({"CRAWL_GUARD_ALLOW": [entry]}))
    with pytest.raises(ConfigError, match="CRAWL_GUARD_ALLOW"):  # the resolver too
        CachingResolver.from_crawler(
            SimpleNamespace(settings=Settings({"CRAWL_GUARD_ALLOW": [entry]})),
            SimpleNamespace(),  # type: ignore[arg-type]
        )


def test_refusals_are_recognised_through_scrapys_wrapping() -> None:
    lookup = BlockedAddressError("localhost", "127.0.0.1", "loopback")
    assert isinstance(lookup, DNSLookupError)
    try:
        try:
            raise lookup
        except DNSLookupError as exc:  # as scrapy.utils._download_handlers does
            raise CannotResolveHostError(str(exc)) from exc
    except CannotResolveHostError as wrapped:
        assert refusal_of(wrapped) == "loopback"
    assert isinstance(BlockedAddress("127.0.0.1", "loopback"), IgnoreRequest)
    assert refusal_of(BlockedAddress("10.0.0.1", "private")) == "private"
    assert refusal_of(CannotResolveHostError("no such name")) is None
    assert refusal_of(None) is None


# -- the resolver ---------------------------------------------------------------------------


def resolver_with(table: dict[str, str], allow: list[str]) -> tuple[CachingResolver, list[str]]:
    calls: list[str] = []

    def lookup(name: str, timeout: float) -> Deferred[str]:
        calls.append(name)
        return defer.succeed(table[name.lower().rstrip(".")])

    resolver = CachingResolver(
        SimpleNamespace(),  # type: ignore[arg-type]
        DnsConfig.from_settings(Settings()),
        lookup=lookup,
        guard=GuardPolicy.from_values(True, allow),
    )
    return resolver, calls


def outcome(d: Deferred[str]) -> str | Failure:
    out: list[str | Failure] = []
    d.addBoth(out.append)
    assert out
    return out[0]


def test_the_resolver_refuses_names_resolving_to_blocked_addresses() -> None:
    table = {"metadata.example": "169.254.169.254", "localhost": "127.0.0.1",
             "public.example": "8.8.8.8", "intranet.example": "10.0.0.5"}  # fmt: skip
    resolver, calls = resolver_with(table, ["intranet.example"])
    assert outcome(resolver.getHostByName("public.example")) == "8.8.8.8"
    assert outcome(resolver.getHostByName("intranet.example")) == "10.0.0.5"
    assert resolver.refusal("public.example") is None
    for name, reason in (("metadata.example", "link-local"), ("LocalHost.", "loopback")):
        for _ in range(2):  # the second time from the cache
            failure = outcome(resolver.getHostByName(name))
            assert isinstance(failure, Failure)
            assert failure.check(BlockedAddressError) and failure.value.reason == reason
        refusal = resolver.refusal(name)
        assert refusal is not None and refusal.reason == reason
    assert calls == ["public.example", "intranet.example", "metadata.example", "LocalHost."]
    # IP literals handed to the resolver are judged too.
    failure = outcome(resolver.getHostByName("10.0.0.1"))
    assert isinstance(failure, Failure) and failure.check(BlockedAddressError)
    assert outcome(resolver.getHostByName("8.8.4.4")) == "8.8.4.4"


def test_without_a_guard_the_resolver_answers_as_before() -> None:
    resolver, _ = resolver_with({"localhost": "127.0.0.1"}, [])
    resolver.guard = None
    assert outcome(resolver.getHostByName("localhost")) == "127.0.0.1"
    assert outcome(resolver.getHostByName("127.0.0.1")) == "127.0.0.1"
    allowed, _ = resolver_with({"localhost": "127.0.0.1"}, ["127.0.0.0/8"])
    assert outcome(allowed.getHostByName("localhost")) == "127.0.0.1"


# -- real crawls -----------------------------------------------------------------------------


class ConnectionLog:
    """A server on 127.0.0.1 (an internal service a page points at) that
    answers any request with a small page and logs every connection."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                self.connections.append(data.split(b"\r\n", 1)[0])
                body = b"<html><body>internal</body></html>"
                head = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(body)}"
                conn.sendall(head.encode() + b"\r\nConnection: close\r\n\r\n" + body)

    def close(self) -> None:
        # shutdown() wakes the thread blocked in accept(); close() alone does
        # not, and the join would wait its whole timeout.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(timeout=5)


@pytest.fixture
def internal() -> Iterator[ConnectionLog]:
    server = ConnectionLog()
    yield server
    server.close()


def hostile_web(make: Callable[..., TestWeb], port: int) -> TestWeb:
    """Host 1's /evil links to the metadata address, to the internal server by
    IP and by the name localhost, and to /go, which redirects to it."""
    internal = f"http://127.0.0.1:{port}"
    links = ["http://169.254.169.254/latest/meta-data/", f"{internal}/",
             f"http://localhost:{port}/by-name", "/go"]  # fmt: skip
    body = "<html><body>" + "".join(f'<a href="{u}">x</a>' for u in links) + "</body></html>"
    special = {1: {"/evil": {"body": body, "content_type": "text/html"},
                   "/go": {"status": 302, "headers": {"Location": f"{internal}/x"}}}}  # fmt: skip
    return make(hosts=1, pages=4, latency_ms=0, links=1, cross_links=0, special=special)


@pytest.mark.parametrize(
    ("robots", "allow_localhost", "address_cap"),
    [(True, False, 4), (False, False, 4), (True, True, 4), (True, False, 0)],
    ids=["robots-on", "robots-off", "localhost-allowed", "robots-on-no-address-cap"],
)
def test_links_and_redirects_to_private_addresses_are_never_fetched(
    robots: bool,
    allow_localhost: bool,
    address_cap: int,
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    internal: ConnectionLog,
    tmp_path: Path,
) -> None:
    web = hostile_web(testweb_factory, internal.port)
    evil = web.base_url(1) + "evil"
    allow = [host_ip(1)] + (["localhost"] if allow_localhost else [])  # not 127.0.0.1
    settings = {
        "CRAWL_GUARD_ALLOW": allow,
        "CRAWL_ROBOTS_OBEY": robots,
        "CRAWL_HOST_DELAY": 0.05,
        "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
        "CRAWL_IDLE_POLL_SECONDS": 0.2,
        "DNS_TIMEOUT": 5,
        "CRAWL_ADDRESS_CONCURRENCY": address_cap,
    }
    proc = start_worker(
        REPO_ROOT, redis_server.url, "guard", [*web.seeds, evil], settings, tmp_path / "w.log",
        extra_args=["-a", "scope=any"],
    )  # fmt: skip
    wait_all([proc], timeout=90)  # the crawl ends by itself
    log = proc.log_path.read_text()
    stats = stats_of(proc.log_path)
    assert "Spider closed (finished)" in log

    # The allowlisted host was crawled as usual, the redirect followed to its hop.
    fetched = page_counts(web.log)
    assert web.expected_urls <= set(fetched), web.expected_urls - set(fetched)
    assert fetched[evil] == 1 and fetched[web.base_url(1) + "go"] == 1
    assert stats["downloader/response_status_count/302"] == 1

    if allow_localhost:
        # Allowed by name: fetched (robots.txt too); by IP (link, redirect): not.
        assert internal.connections == [b"GET /robots.txt HTTP/1.1", b"GET /by-name HTTP/1.1"]
        assert stats["guard/blocked"] == 3
    else:
        # Nothing reached the internal server; the metadata address, the
        # internal server by IP and by name and the redirect hop: 4 refusals.
        assert internal.connections == []
        assert stats["guard/blocked"] == 4
        # A name is refused by the resolver: no connection, no retry, no DNS
        # failure (its host is not parked). With the address cap (the default)
        # the claim asked the resolver for the name's address first, so its
        # refusal is known before any request leaves and the guard middleware
        # refuses it. Without, the download's lookup is refused (with
        # robots.txt, its robots.txt's).
        refused_lookups = stats.get(f"{EXCEPTIONS}scrapy.exceptions.CannotResolveHostError")
        if address_cap:
            assert "guard/blocked_robotstxt" not in stats and refused_lookups is None
            assert stats["frontier/address_unresolved"] == 1
        else:
            assert stats.get("guard/blocked_robotstxt", 0) == (1 if robots else 0)
            assert refused_lookups == 1
    assert "retry/count" not in stats and "dns/lookup_failed" not in stats
    # IP literals are refused before any download: no connection attempt at all
    # (RobotsDeferred: a seed waits for its host's robots.txt).
    exceptions = [k for k in stats if k.startswith(EXCEPTIONS)]
    allowed = ("CannotResolveHostError", "BlockedAddress", "RobotsDeferred")
    assert all(k.endswith(allowed) for k in exceptions), exceptions
    assert stats[f"{EXCEPTIONS}crawlproject.guard.errors.BlockedAddress"] >= 3
    # One INFO line per refused host.
    assert log.count("Guard: not fetching") == (2 if allow_localhost else 3)
    assert "http://169.254.169.254/latest/meta-data/" in log
