"""The private-address guard (``CRAWL_GUARD_*``, :mod:`crawlproject.guard.policy`).

Two downloader middlewares; see ``DOWNLOADER_MIDDLEWARES`` in
crawlproject/settings.py.

:class:`AddressGuardMiddleware` (order 50, before robots.txt handling at 100)
refuses a request before it is downloaded when its URL's host is an IP literal
the guard refuses, or a name the DNS resolver (``CachingResolver``) already
found to resolve to one: it raises :class:`~crawlproject.guard.errors.BlockedAddress`
(an ``IgnoreRequest``), so no robots.txt is fetched for it, nothing is retried
and the spider's errback sees a decision, not a failure. Every request passes
here, including robots.txt fetches (``engine.download``) and each redirect hop
(RedirectMiddleware hands a hop back to the scheduler as a new request).

A name not yet resolved is refused by the resolver itself when the download
connects (``BlockedAddressError``; Scrapy sees a ``CannotResolveHostError``
and the resolver tells it apart): no connection is made. :class:`BlockedLookupMiddleware`
(order 560, above RetryMiddleware at 550: exceptions pass from high to low
order) marks that request ``dont_retry``, as retrying it is pointless;
``middlewares/dns.py`` does not count it as a DNS failure (nor park its host).

Either way the refused request is counted once, here (``guard/blocked``; a
robots.txt fetch ``guard/blocked_robotstxt``: its page is refused too, by the
robots.txt middleware, and counted), logged at INFO once per host (per
process, bounded), and a frontier slot it held is released at once: it made
no contact with the host. A seed (the operator's choice) is a WARNING of its
own and counts in ``seeds/refused`` too: its host name resolved to a refused
address (IP literals and ``localhost`` never get here: they are refused
before they are queued, crawlproject/frontier/admission/seed_check.py).

Behind a proxy (``HTTP_PROXY``/``HTTPS_PROXY`` in the environment, or a
request's ``meta["proxy"]``) the connection goes to the proxy, which resolves
the URL's host itself: the resolver above never sees that name. So
:class:`ProxiedHostGuardMiddleware` (order 760, after Scrapy's
HttpProxyMiddleware at 750 has set ``meta["proxy"]`` from the environment)
resolves the target host of every proxied request through the same resolver
and refuses it as above when it resolves to a refused address (IP literals
are refused at order 50 already). Limits: a name this worker cannot resolve
is left to the proxy (a proxy is often there to reach what the worker cannot);
the proxy's own lookup may differ from the worker's (DNS rebinding: a name
answering differently within its TTL). The proxy's own address (name or IP
literal) is checked by the resolver when Twisted connects to it: allowlist a
proxy on a private address in CRAWL_GUARD_ALLOW.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.error import DNSLookupError

from crawlproject.dns.resolver import CachingResolver
from crawlproject.frontier.admission.seed_check import SEEDS_REFUSED
from crawlproject.frontier.basics.request_meta import SEED_META_KEY
from crawlproject.guard.errors import (
    BlockedAddress,
    BlockedAddressError,
    installed_resolver,
    refusal_of,
)
from crawlproject.guard.policy import GuardPolicy, parse_address
from crawlproject.once import OncePerKey
from middlewares.robotstxt import ROBOTS_META_KEY

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

LOGGED_HOSTS_MAX = 10_000


class AddressGuardMiddleware:
    def __init__(self, crawler: Crawler, policy: GuardPolicy, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.policy = policy
        self.stats = stats
        self._resolver: CachingResolver | None = None
        self._logged = OncePerKey(LOGGED_HOSTS_MAX)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AddressGuardMiddleware:
        policy = GuardPolicy.from_settings(crawler.settings)
        if not policy.enabled:
            logger.warning("Guard: off (CRAWL_GUARD_ENABLED): private addresses are fetched")
            raise NotConfigured()  # AddressGuardMiddleware's WARNING says it once
        logger.info(
            "Guard: private, loopback, link-local and reserved addresses refused; allowed: %s",
            policy.describe_allow(),
        )
        assert crawler.stats is not None
        middleware = cls(crawler, policy, crawler.stats)
        crawler.signals.connect(middleware._find_resolver, signals.engine_started)
        return middleware

    def _find_resolver(self) -> None:
        resolver = installed_resolver()
        if isinstance(resolver, CachingResolver) and resolver.guard is not None:
            self._resolver = resolver
        else:
            logger.warning(
                "Guard: the DNS resolver is %s, not crawlproject.dns.resolver.CachingResolver "
                "with the guard on: host names are not checked (set TWISTED_DNS_RESOLVER)",
                type(resolver).__name__,
            )

    def process_request(self, request: Request) -> None:
        host = urlparse_cached(request).hostname
        if not host:
            return None
        reason = self.policy.refuses_literal(host)
        if reason is None and self._resolver is not None:
            refusal = self._resolver.refusal(host)
            reason = refusal.reason if refusal is not None else None
        if reason is not None:
            raise BlockedAddress(host, reason)
        return None

    def process_exception(self, request: Request, exception: Exception) -> None:
        reason = refusal_of(exception, urlparse_cached(request).hostname)
        if reason is None:
            return None
        if request.meta.get(ROBOTS_META_KEY):
            self.stats.inc_value("guard/blocked_robotstxt")
            return None
        self.stats.inc_value("guard/blocked")
        host = urlparse_cached(request).hostname or "?"
        if request.meta.get(SEED_META_KEY) and not request.meta.get("redirect_times"):
            # The operator's seed, refused only now that its name resolved (an
            # IP literal or localhost is refused before it is queued, and not
            # marked seen: crawlproject/frontier/admission/seed_check.py): it stays seen.
            self.stats.inc_value(SEEDS_REFUSED)
            logger.warning(
                "Seed %r not crawled: %s resolves to a %s address, which the guard refuses "
                "(to crawl it: CRAWL_GUARD_ALLOW=%s or its network; this crawl keeps it as "
                "seen: start over with crawlproject reset, or use another crawl name)",
                request.url,
                host,
                reason,
                host,
            )
            return None
        if self._logged.first(host):
            logger.info(
                "Guard: not fetching %s: %s is a %s address (CRAWL_GUARD_ALLOW)",
                request.url,
                host,
                reason,
            )
        # On the frontier, its lease path frees the URL's slot at once (no
        # contact with the host): crawlproject/frontier/claims/leases.py ``failed``.
        return None


class BlockedLookupMiddleware:
    """Keeps RetryMiddleware from retrying a download the resolver refused."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BlockedLookupMiddleware:
        if not GuardPolicy.from_settings(crawler.settings).enabled:
            raise NotConfigured()  # AddressGuardMiddleware's WARNING says it
        return cls()

    def process_exception(self, request: Request, exception: Exception) -> None:
        if refusal_of(exception, urlparse_cached(request).hostname) is not None:
            request.meta["dont_retry"] = True
        return None


class ProxiedHostGuardMiddleware:
    """The guard's check of a proxied request's host name (module docstring)."""

    def __init__(self, policy: GuardPolicy) -> None:
        self.policy = policy

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxiedHostGuardMiddleware:
        policy = GuardPolicy.from_settings(crawler.settings)
        if not policy.enabled:
            raise NotConfigured()  # AddressGuardMiddleware's WARNING says it
        return cls(policy)

    async def process_request(self, request: Request) -> None:
        if not request.meta.get("proxy"):
            return None
        host = urlparse_cached(request).hostname
        if not host or parse_address(host) is not None or self.policy.allows_name(host):
            return None  # IP literals: AddressGuardMiddleware checked them
        resolver = installed_resolver()
        if not isinstance(resolver, CachingResolver) or resolver.guard is None:
            return None  # AddressGuardMiddleware warned at start
        try:
            await maybe_deferred_to_future(resolver.getHostByName(host))
        except BlockedAddressError as exc:
            # Counted and logged by AddressGuardMiddleware.process_exception.
            raise BlockedAddress(host, exc.reason) from exc
        except DNSLookupError:
            return None  # the proxy may resolve names this worker cannot
        return None
