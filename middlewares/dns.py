"""Set aside the queue of a host that cannot answer: its name does not
resolve, or its connections are refused or time out.

A downloader middleware. A fetch that failed for good with a DNS error (Scrapy
2.19 raises ``CannotResolveHostError``; older handlers raised Twisted's
``DNSLookupError``) is counted (``dns/lookup_failed``). When the last
``CRAWL_DNS_PARK_AFTER`` fetches of one host (politeness key) all failed so, the
host's queued URLs move to the frontier's parked list, the same way a
duplicate-trap host is set aside (``middlewares/dedupe.py``): kept, flagged so
that URLs found later go there too, listed by ``crawlproject parked`` and put
back by ``crawlproject parked --requeue``. Any response from the host resets
its count. Stats ``dns/parked_hosts``, ``dns/parked_urls``; one WARNING per host.

Only answers count: a name that does not exist (NXDOMAIN) or has no address.
A lookup that got no answer (the resolver's servers failed or timed out:
EAI_AGAIN, ``DNS_TIMEOUT``) says nothing sure about the host, and parking is
fleet-wide and stays until an operator requeues: such failures are counted
apart (``dns/lookup_failed_temporary``) and never park, so an outage of one
worker's resolver cannot set aside every host it meets. The reason comes from
the resolver's negative cache (``CachingResolver.failure_reason``); with
another resolver every DNS failure counts.

Its order sits below Scrapy's RetryMiddleware (550): exceptions travel from high
to low order and a retry stops them, so this sees a failure only once the
retries gave up. robots.txt fetches pass through it too, so with robots.txt on
a dead host is usually parked on its robots.txt failures
(``CRAWL_ROBOTS_DEFER_RETRIES`` apart), before any of its pages is tried.

Connections refused (``DownloadConnectionRefusedError``) and timeouts
(``DownloadTimeoutError``, Twisted's ``TCPTimedOutError``/``TimeoutError``)
count the same way, after Scrapy's retries: ``CRAWL_CONNECT_PARK_AFTER`` such
fetches in a row of one host park it with the reason ``connection_refused`` or
``timeout`` (``crawlproject parked --reasons``). Stats ``connect/refused``,
``connect/timeout``, ``connect/parked_hosts``, ``connect/parked_urls``. The
URL that failed is finished as a failed fetch (it was tried); its host's
queued URLs are kept.

It also attaches the crawler's stats to the DNS resolver
(``crawlproject.dns.resolver.CachingResolver``) when the engine starts, since
Scrapy builds the resolver before the crawler exists.

A lookup the private-address guard refused (the name resolves to a private
address: ``crawlproject.guard``) is not a DNS failure: it is neither counted
here nor parks its host (the guard middleware counts it).

Without the frontier as scheduler it only counts (nothing to park in).
State per process is bounded: only hosts with a current failure streak are
tracked, at most ``TRACKED_HOSTS_MAX``, least recently failed dropped first.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, TypeVar

from redis.exceptions import RedisError
from scrapy import Request, signals
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
)
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import load_object
from twisted.internet.error import ConnectionRefusedError as TxConnectionRefusedError
from twisted.internet.error import DNSLookupError, TCPTimedOutError
from twisted.internet.error import TimeoutError as TxTimeoutError

from crawlproject.dns.resolver import CachingResolver, DnsConfig, is_temporary
from crawlproject.frontier.basics.urls import InvalidURL
from crawlproject.frontier.scrapy_glue.frontier_lookup import frontier_of, is_frontier
from crawlproject.guard.errors import installed_resolver as _installed_resolver  # tests swap it
from crawlproject.guard.errors import refusal_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

T = TypeVar("T")

DNS_ERRORS = (CannotResolveHostError, DNSLookupError)
# A host that answered nothing: its reason when it is parked for them.
CONNECT_ERRORS: tuple[tuple[tuple[type[Exception], ...], str], ...] = (
    ((DownloadConnectionRefusedError, TxConnectionRefusedError), "connection_refused"),
    ((DownloadTimeoutError, TCPTimedOutError, TxTimeoutError), "timeout"),
)
# Hosts with a failure streak, hosts parked here, and the politeness keys of
# origins, each remembered per worker up to this many; about 200 bytes each.
TRACKED_HOSTS_MAX = 10_000


class DnsFailureMiddleware:
    def __init__(
        self, crawler: Crawler, config: DnsConfig, stats: StatsCollector, park: bool
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self.park = park
        self._streaks: OrderedDict[str, int] = OrderedDict()  # host -> failures in a row
        self._parked: OrderedDict[str, None] = OrderedDict()  # parked by this worker
        self._keys: OrderedDict[str, str] = OrderedDict()  # origin -> politeness key
        self._resolver: CachingResolver | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DnsFailureMiddleware:
        config = DnsConfig.from_settings(crawler.settings)
        on_frontier = is_frontier(load_object(crawler.settings["SCHEDULER"]))
        if (config.park_after or config.connect_park_after) and not on_frontier:
            logger.info("DNS: hosts are not parked: SCHEDULER is not the crawlproject frontier")
        assert crawler.stats is not None
        middleware = cls(
            crawler,
            config,
            crawler.stats,
            park=bool(config.park_after or config.connect_park_after) and on_frontier,
        )
        crawler.signals.connect(middleware._attach_resolver_stats, signals.engine_started)
        crawler.signals.connect(middleware._detach_resolver_stats, signals.engine_stopped)
        return middleware

    # -- downloader middleware -----------------------------------------------------------

    def process_response(self, request: Request, response: Response) -> Response:
        if self._streaks or self._parked:  # hosts resolve again: forget their failures
            host = self._host(request)
            if host is not None:
                self._streaks.pop(host, None)
                self._parked.pop(host, None)
        return response

    async def process_exception(self, request: Request, exception: Exception) -> None:
        if not isinstance(exception, DNS_ERRORS):
            await self._connect_failed(request, exception)
            return None
        if refusal_of(exception, urlparse_cached(request).hostname) is not None:
            return None
        self.stats.inc_value("dns/lookup_failed")
        if self._temporary(request):
            # No answer (the resolver's servers failed or timed out) says
            # nothing sure about the host: not counted, so an outage of this
            # worker's resolver parks no host of the fleet.
            self.stats.inc_value("dns/lookup_failed_temporary")
            return None
        if not self.park or not self.config.park_after:
            return None
        host = self._host(request)
        if host is None or host in self._parked:
            return None
        await self._count(host, self.config.park_after, "dns")
        return None

    async def _connect_failed(self, request: Request, exception: Exception) -> None:
        reason = next((why for kinds, why in CONNECT_ERRORS if isinstance(exception, kinds)), None)
        if reason is None:
            return
        self.stats.inc_value(f"connect/{reason.removeprefix('connection_')}")
        if not self.park or not self.config.connect_park_after:
            return
        host = self._host(request)
        if host is None or host in self._parked:
            return
        await self._count(host, self.config.connect_park_after, reason)

    async def _count(self, host: str, park_after: int, reason: str) -> None:
        """One more failure of ``host`` in a row; parks it at ``park_after``."""
        streak = self._streaks.pop(host, 0) + 1
        if streak < park_after:
            _remember(self._streaks, host, streak)
            return
        await self._park(host, streak, reason)

    # -- parking ----------------------------------------------------------------------------

    async def _park(self, host: str, streak: int, reason: str) -> None:
        frontier = frontier_of(self.crawler).frontier
        if frontier is None:  # the frontier did not open: nothing to park in
            return
        prefix = "dns" if reason == "dns" else "connect"
        _remember(self._parked, host, None)  # before the await: one park per host
        try:
            parked = await frontier.park_host(host, reason)
        except RedisError as exc:
            self._parked.pop(host, None)
            _remember(self._streaks, host, streak)  # the next failure tries again
            self.stats.inc_value(f"{prefix}/park_errors")
            logger.warning(
                "Could not park %s after %d failures (%s): %s", host, streak, reason, exc
            )
            return
        self.stats.inc_value(f"{prefix}/parked_hosts")
        self.stats.inc_value(f"{prefix}/parked_urls", parked)
        logger.warning(
            "%s: %d fetches in a row failed (%s): host parked, %d queued URL(s) set aside "
            "(crawlproject parked --reasons; --requeue puts them back)",
            host,
            streak,
            "DNS error" if reason == "dns" else reason.replace("_", " "),
            parked,
        )

    def _host(self, request: Request) -> str | None:
        """The frontier's politeness key of ``request``; None when not parking.

        A key depends on the URL's scheme and host[:port] alone, so it is kept
        per origin: a response costs a dict lookup, not a canonicalization."""
        if not self.park:
            return None
        parts = urlparse_cached(request)
        origin = f"{parts.scheme}://{parts.netloc}"
        key = self._keys.get(origin)
        if key is None:
            try:
                key = frontier_of(self.crawler).politeness_key(request.url)
            except InvalidURL:
                return None
        _remember(self._keys, origin, key)
        return key

    def _temporary(self, request: Request) -> bool:
        """Whether the resolver says the last lookup of the request's host got
        no answer. Unknown (another resolver, or the failure not cached): False."""
        if self._resolver is None:
            return False
        hostname = urlparse_cached(request).hostname
        reason = self._resolver.failure_reason(hostname) if hostname else None
        return reason is not None and is_temporary(reason)

    # -- the resolver ----------------------------------------------------------------------

    def _attach_resolver_stats(self) -> None:
        resolver = _installed_resolver()
        if isinstance(resolver, CachingResolver):
            resolver.attach_stats(self.stats)
            self._resolver = resolver
        else:
            logger.info(
                "DNS: the resolver is %s, not crawlproject.dns.resolver.CachingResolver: "
                "failed lookups are not cached (set TWISTED_DNS_RESOLVER)",
                type(resolver).__name__,
            )

    def _detach_resolver_stats(self) -> None:
        if self._resolver is not None:
            self._resolver.detach_stats(self.stats)
            self._resolver = None


def _remember(table: OrderedDict[str, T], key: str, value: T) -> None:
    """Sets ``key`` as the most recent entry of a table of at most TRACKED_HOSTS_MAX."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > TRACKED_HOSTS_MAX:
        table.popitem(last=False)
