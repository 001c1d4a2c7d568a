"""A DNS resolver for a whole-web worker: Scrapy's ``TWISTED_DNS_RESOLVER``.

Scrapy's default (``scrapy.resolver.CachingThreadedResolver``) keeps up to
``DNSCACHE_SIZE`` (10,000) names in one module-level cache that never expires,
and does not remember failures: every URL of a dead host costs a system lookup,
i.e. a thread of the reactor's pool (``REACTOR_THREADPOOL_MAXSIZE``) for up to
``DNS_TIMEOUT`` seconds. :class:`CachingResolver` resolves the same way (the
system's resolver, ``socket.gethostbyname`` in a thread, IPv4) and, per
instance:

* keeps resolved names in an LRU of ``CRAWL_DNS_CACHE_SIZE`` entries, each for
  ``CRAWL_DNS_CACHE_TTL_SECONDS`` (the system call gives no TTL, so a fixed one
  bounds how long a moved site is fetched at its old address);
* keeps failed names in an LRU of ``CRAWL_DNS_NEGATIVE_CACHE_SIZE`` entries for
  ``CRAWL_DNS_NEGATIVE_TTL_SECONDS``: a second lookup of a dead name fails at
  once, without a system lookup;
* lets concurrent lookups of one name share one system lookup;
* answers IP literals itself: no cache, no lookup, no stats (so an IPv6
  literal URL such as ``http://[::1]:8080/`` is fetched: Scrapy's resolver
  hands it to ``gethostbyname``, which fails it as a DNS error);
* answers the names of ``CRAWL_HOST_ADDRESSES`` (name -> address) from that
  map, without a lookup or stats: an operator pins a host to an address, the
  tests put many names on one loopback address;
* answers the frontier's question "which address?" (:meth:`CachingResolver.address_of`,
  asked when a URL is claimed, for the address cap) from the same cache and
  lookups, without counting its cache answers as a download's.

The private-address guard (:mod:`crawlproject.guard.policy`,
``CRAWL_GUARD_*``) is enforced here for host names: a name that resolves to a
refused address (and is not allowlisted) fails with
:class:`~crawlproject.guard.errors.BlockedAddressError`, a ``DNSLookupError``,
so Twisted never connects. The refusal is kept with the resolved names (same
size and TTL; with the caches off still 1,000 names for 60 s), and
:meth:`CachingResolver.refusal` tells the guard middleware
(``middlewares/guard.py``) that a download's DNS failure was a refusal (Twisted
reports any failed lookup as "no results") and lets it refuse the name's next
requests before they are downloaded. An IP literal handed to the resolver is checked too (Twisted
connects to an IPv4 literal without asking the resolver: the middleware checks
those). The guard reads the process's settings, as the rest of the resolver
(a spider's ``custom_settings`` do not reach it).

``DNSCACHE_ENABLED = False`` turns the caches off; Scrapy's ``DNSCACHE_SIZE``,
when set, sizes the resolved names' cache unless ``CRAWL_DNS_CACHE_SIZE`` is
set too (both set and different: refused at start). ``DNS_TIMEOUT`` bounds
each system lookup.

Stats (``dns/lookups``, ``dns/failures``, ``dns/cache_hits``,
``dns/negative_hits``, ``dns/coalesced``) go to the stats collectors attached
with :meth:`CachingResolver.attach_stats`: Scrapy builds the resolver before
any crawler exists (from the process's settings), so the DNS middleware
(``middlewares/dns.py``) attaches its crawler's stats when the engine starts,
and asks :meth:`CachingResolver.failure_reason` whether a failure was an
answer (the name does not exist) or none (:func:`is_temporary`).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Protocol, Self, cast

from twisted.internet import defer
from twisted.internet.base import ThreadedResolver
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from twisted.python.failure import Failure
from zope.interface import implementer

from crawlproject.dns.cache import TtlLru
from crawlproject.frontier.crawl.address_settings import normal_address
from crawlproject.guard.errors import BlockedAddressError
from crawlproject.guard.policy import GuardPolicy
from crawlproject.setting_values import (
    ConfigError,
    Setting,
    crawl_setting_or_scrapy,
    read_config,
)

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.base import ReactorBase

logger = logging.getLogger(__name__)

# How ThreadedResolver words the reason of a failure without an answer.
_EAI_AGAIN = f"[Errno {socket.EAI_AGAIN}]"
_TIMEOUT = "timeout error"

# Refused names are remembered at least so many, so long (see CachingResolver).
BLOCKED_MIN_SIZE = 1000
BLOCKED_MIN_TTL_SECONDS = 60.0

# A system lookup: (name, timeout in seconds) -> Deferred address (IPv4 text).
Lookup = Callable[[str, float], Deferred[str]]


@dataclass(frozen=True)
class DnsConfig:
    """The DNS settings (``CRAWL_DNS_*`` and Scrapy's ``DNSCACHE_ENABLED``,
    ``DNS_TIMEOUT``), read once and checked together."""

    cache_enabled: bool  # DNSCACHE_ENABLED
    cache_size: int  # CRAWL_DNS_CACHE_SIZE, or DNSCACHE_SIZE
    cache_ttl_seconds: Annotated[float, Setting("CRAWL_DNS_CACHE_TTL_SECONDS")]
    negative_cache_size: Annotated[int, Setting("CRAWL_DNS_NEGATIVE_CACHE_SIZE")]
    negative_ttl_seconds: Annotated[float, Setting("CRAWL_DNS_NEGATIVE_TTL_SECONDS")]
    timeout_seconds: float  # DNS_TIMEOUT
    park_after: Annotated[int, Setting("CRAWL_DNS_PARK_AFTER")]
    connect_park_after: Annotated[int, Setting("CRAWL_CONNECT_PARK_AFTER")]
    # CRAWL_HOST_ADDRESSES: host name (lowercase, no final dot) -> IP address.
    host_addresses: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> DnsConfig:
        return read_config(
            cls,
            settings,
            cache_enabled=settings.getbool("DNSCACHE_ENABLED", True),
            # Scrapy's DNSCACHE_SIZE is honoured when CRAWL_DNS_CACHE_SIZE is not set.
            cache_size=crawl_setting_or_scrapy(
                settings, "CRAWL_DNS_CACHE_SIZE", "DNSCACHE_SIZE", int
            ),
            timeout_seconds=settings.getfloat("DNS_TIMEOUT", 60.0),
            host_addresses=read_host_addresses(settings.getdict("CRAWL_HOST_ADDRESSES") or {}),
        )

    def validate(self) -> None:
        if self.cache_size < 0 or self.negative_cache_size < 0:
            raise ConfigError(
                "CRAWL_DNS_CACHE_SIZE and CRAWL_DNS_NEGATIVE_CACHE_SIZE must be >= 0 (0: no cache)"
            )
        if self.cache_ttl_seconds < 0 or self.negative_ttl_seconds < 0:
            raise ConfigError(
                "CRAWL_DNS_CACHE_TTL_SECONDS and CRAWL_DNS_NEGATIVE_TTL_SECONDS must be >= 0 "
                "(0: not cached)"
            )
        if not self.timeout_seconds > 0:
            raise ConfigError("DNS_TIMEOUT must be > 0")
        if self.park_after < 0 or self.connect_park_after < 0:
            raise ConfigError(
                "CRAWL_DNS_PARK_AFTER and CRAWL_CONNECT_PARK_AFTER must be >= 0 (0: never park)"
            )


def read_host_addresses(raw: dict[str, object]) -> dict[str, str]:
    """``CRAWL_HOST_ADDRESSES`` by host name; ConfigError (one line) for an
    entry that is not ``host name -> IP address``."""
    out: dict[str, str] = {}
    for name, value in raw.items():
        key = _key(str(name).strip())
        address = normal_address(str(value)) if isinstance(value, str) else None
        if not key or any(c in key for c in "/:@ *") or _is_ip_literal(key):
            raise ConfigError(
                f"CRAWL_HOST_ADDRESSES: {name!r} is not a host name (no scheme, port or path)"
            )
        if address is None:
            raise ConfigError(
                f"CRAWL_HOST_ADDRESSES[{name!r}] must be an IP address, got {value!r}"
            )
        out[key] = address
    return out


class _HasSettings(Protocol):
    # Scrapy passes its CrawlerProcess here, not a Crawler: only settings exist.
    @property
    def settings(self) -> BaseSettings: ...


@implementer(IResolverSimple)
class CachingResolver:
    """See the module docstring. Same contract as Scrapy's resolvers:
    ``from_crawler(crawler, reactor)``, then ``install_on_reactor()``."""

    def __init__(
        self,
        reactor: ReactorBase,
        config: DnsConfig,
        lookup: Lookup | None = None,
        clock: Callable[[], float] = time.monotonic,
        guard: GuardPolicy | None = None,
    ) -> None:
        self.reactor = reactor
        self.config = config
        self.guard = guard if guard is not None and guard.enabled else None
        self._lookup = lookup if lookup is not None else _threaded_lookup(reactor)
        self._clock = clock
        enabled = config.cache_enabled
        self._positive: TtlLru[str] = TtlLru(
            config.cache_size if enabled else 0, config.cache_ttl_seconds
        )
        # A failure is kept as its reason ("[Errno -2] Name or service not
        # known"), interned: a few distinct texts shared by all entries.
        self._negative: TtlLru[str] = TtlLru(
            config.negative_cache_size if enabled else 0, config.negative_ttl_seconds
        )
        # Names that resolved to an address the guard refuses, kept as
        # resolved names are: name -> (address, reason). Kept (a little) even
        # with the caches off: the guard middleware asks it why a download's
        # lookup failed, Twisted having replaced the refusal by "no results".
        self._blocked: TtlLru[tuple[str, str]] = TtlLru(
            max(config.cache_size if enabled else 0, BLOCKED_MIN_SIZE),
            max(config.cache_ttl_seconds, BLOCKED_MIN_TTL_SECONDS),
        )
        # Lookups under way: each name's waiting callers.
        self._pending: dict[str, list[Deferred[str]]] = {}
        self._stats: list[StatsCollector] = []

    @classmethod
    def from_crawler(cls, crawler: _HasSettings, reactor: ReactorBase) -> Self:
        return cls(
            reactor,
            DnsConfig.from_settings(crawler.settings),
            guard=GuardPolicy.from_settings(crawler.settings),
        )

    def install_on_reactor(self) -> None:
        # @implementer declares the interface; mypy does not read zope's declarations.
        self.reactor.installResolver(cast(IResolverSimple, self))
        logger.info(
            "DNS: %s resolved names cached for %.0f s, %s failed names for %.0f s, "
            "lookups time out after %.1f s",
            f"{self._positive.size:,}" if self._positive.enabled else "no",
            self.config.cache_ttl_seconds,
            f"{self._negative.size:,}" if self._negative.enabled else "no",
            self.config.negative_ttl_seconds,
            self.config.timeout_seconds,
        )

    # -- stats ---------------------------------------------------------------------

    def attach_stats(self, stats: StatsCollector) -> None:
        """Count this resolver's ``dns/*`` stats in ``stats`` from now on."""
        if all(s is not stats for s in self._stats):
            self._stats.append(stats)

    def detach_stats(self, stats: StatsCollector) -> None:
        self._stats = [s for s in self._stats if s is not stats]

    def _inc(self, key: str) -> None:
        for stats in self._stats:
            stats.inc_value(key)

    # -- for the DNS middleware ------------------------------------------------------

    def failure_reason(self, name: str) -> str | None:
        """Why the last lookup of ``name`` failed, while that failure is cached
        (e.g. ``"[Errno -2] Name or service not known"``); None otherwise."""
        return self._negative.get(_key(name), self._clock())

    def refusal(self, name: str) -> BlockedAddressError | None:
        """The guard's refusal of ``name`` while its resolution is cached (it
        resolved to a refused address); None otherwise."""
        key = _key(name)
        blocked = self._blocked.get(key, self._clock())
        return None if blocked is None else BlockedAddressError(key, *blocked)

    # -- IResolverSimple -------------------------------------------------------------

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:
        # ``timeout`` is Twisted's per-call retry schedule; DNS_TIMEOUT rules
        # instead, as in Scrapy's resolver.
        return self._get(name, count=True)

    def address_of(self, name: str) -> Deferred[str]:
        """``name``'s address, as a download would get it, for the frontier's
        address cap: its cache answers are not counted (the download's are)."""
        return self._get(name, count=False)

    def _get(self, name: str, count: bool) -> Deferred[str]:
        if _is_ip_literal(name):
            return self._literal(name)
        key = _key(name)
        pinned = self.config.host_addresses.get(key)
        if pinned is not None:
            return self._pinned(key, pinned)
        now = self._clock()
        address = self._positive.get(key, now)
        if address is not None:
            if count:
                self._inc("dns/cache_hits")
            return defer.succeed(address)
        blocked = self._blocked.get(key, now)
        if blocked is not None:  # a new exception each time: raising one grows its traceback
            if count:
                self._inc("dns/cache_hits")
            return defer.fail(BlockedAddressError(key, *blocked))
        reason = self._negative.get(key, now)
        if reason is not None:
            if count:
                self._inc("dns/negative_hits")
            return defer.fail(DNSLookupError(f"address {name!r} not found: {reason} (cached)"))
        waiter: Deferred[str] = Deferred()
        waiters = self._pending.get(key)
        if waiters is not None:
            if count:
                self._inc("dns/coalesced")
            waiters.append(waiter)
            return waiter
        self._pending[key] = [waiter]
        self._inc("dns/lookups")
        try:
            lookup = self._lookup(name, self.config.timeout_seconds)
        except Exception:  # a lookup function must not raise, but never leave waiters hanging
            lookup = defer.fail()
        lookup.addCallbacks(
            self._resolved, self._failed, callbackArgs=(key,), errbackArgs=(key, name)
        )
        return waiter

    def _literal(self, name: str) -> Deferred[str]:
        if self.guard is not None:
            reason = self.guard.refuses(name, name)
            if reason is not None:
                return defer.fail(BlockedAddressError(name, name, reason))
        return defer.succeed(name)

    def _pinned(self, key: str, address: str) -> Deferred[str]:
        """A name of CRAWL_HOST_ADDRESSES: its address, unless the guard refuses it."""
        reason = self.guard.refuses(key, address) if self.guard is not None else None
        if reason is not None:
            return defer.fail(BlockedAddressError(key, address, reason))
        return defer.succeed(address)

    def _resolved(self, address: str, key: str) -> None:
        self._negative.discard(key)
        reason = self.guard.refuses(key, address) if self.guard is not None else None
        if reason is not None:
            self._positive.discard(key)
            self._blocked.put(key, (address, reason), self._clock())
            for waiter in self._pending.pop(key, []):
                if not waiter.called:
                    waiter.errback(BlockedAddressError(key, address, reason))
            return
        self._blocked.discard(key)
        self._positive.put(key, address, self._clock())
        for waiter in self._pending.pop(key, []):
            if not waiter.called:  # a caller may have cancelled it
                waiter.callback(address)

    def _failed(self, failure: Failure, key: str, name: str) -> None:
        self._inc("dns/failures")
        if failure.check(DNSLookupError):
            self._positive.discard(key)
            self._blocked.discard(key)
            self._negative.put(key, _reason(failure, name), self._clock())
        for waiter in self._pending.pop(key, []):
            if not waiter.called:
                waiter.errback(failure)


def _threaded_lookup(reactor: ReactorBase) -> Lookup:
    """The system's resolver in the reactor's thread pool, as Scrapy's default."""
    threaded = ThreadedResolver(reactor)

    def lookup(name: str, timeout_seconds: float) -> Deferred[str]:
        # Typed Sequence[int]; Twisted sums it, so a float works (as in Scrapy).
        return threaded.getHostByName(name, (timeout_seconds,))  # type: ignore[arg-type]

    return lookup


def is_temporary(reason: str) -> bool:
    """Whether a failure ``reason`` says the resolver got no answer (EAI_AGAIN:
    its servers failed, e.g. SERVFAIL, or were unreachable; or DNS_TIMEOUT ran
    out), rather than an answer that the name has no address (EAI_NONAME,
    EAI_NODATA)."""
    return reason.startswith(_EAI_AGAIN) or reason.startswith(_TIMEOUT)


def _key(name: str) -> str:
    return name.lower().rstrip(".")


def _reason(failure: Failure, name: str) -> str:
    """Why a lookup failed, without the name: ThreadedResolver raises
    ``DNSLookupError("address 'NAME' not found: REASON")``."""
    args = failure.value.args if isinstance(failure.value, DNSLookupError) else ()
    if args and all(isinstance(a, str) for a in args):
        detail = " ".join(args)  # its str() adds "DNS lookup failed: " and "."
    else:
        detail = failure.getErrorMessage()
    return sys.intern(detail.removeprefix(f"address {name!r} not found: "))


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
