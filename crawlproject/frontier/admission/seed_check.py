"""Seeds the crawler cannot fetch as written: named in one WARNING each,
counted (``seeds/refused``), and skipped; every other seed is crawled.

A seed is the operator's choice, so a seed that cannot be fetched is said
at WARNING (a link a page carries is not: it is counted at DEBUG,
``frontier/invalid_url``). What is judged here, without fetching:

* as written (:func:`seed_problem`): malformed (``http://[::1/``), an
  impossible port (``:99999``), a scheme other than http and https, no host;
* against the private-address guard (:func:`guard_problem`): an IP literal
  the guard refuses, or ``localhost`` (RFC 6761: always loopback), unless
  ``CRAWL_GUARD_ALLOW`` allows it. Such a seed is refused before it reaches
  the seen set, so once a setting allows it the next run fetches it. A host
  *name* that resolves to a refused address is only known at its fetch: the
  guard refuses it then (its INFO line) and the seed stays marked seen
  (docs/crawling.md says how to start over).

The same rule holds wherever seeds come from: ``-a seeds=``, the ``web``
spider's ``start()``, any spider's ``start_urls`` and ``start()`` requests,
the ``<crawl>:start_urls`` list, and ``crawlproject seed``.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crawlproject.frontier.basics.urls import DEFAULT_PORTS, InvalidURL, UrlCanonicalizer
from crawlproject.guard.policy import GuardPolicy, parse_address

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

SEEDS_REFUSED = "seeds/refused"
MAX_PORT = 65535
_PORT = re.compile(r":(\d*)$")
_CANONICAL = UrlCanonicalizer(())
LOCALHOST = "localhost"


def seed_problem(url: str) -> str | None:
    """What keeps the crawler from fetching ``url`` as written (one short
    phrase), or None."""
    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # "Invalid IPv6 URL"
        return f"malformed URL ({exc})"
    scheme = parts.scheme.lower()
    if not scheme or (scheme not in DEFAULT_PORTS and "." in scheme):  # "host.example:80/"
        return "no scheme (write http:// or https:// before the host)"
    if scheme not in DEFAULT_PORTS:
        return f"unsupported scheme {scheme!r} (only http and https are crawled)"
    hostport = parts.netloc.rpartition("@")[2]
    port = _PORT.search(hostport) if not hostport.endswith("]") else None
    if port is not None and port.group(1) and not 0 < int(port.group(1)) <= MAX_PORT:
        return f"impossible port {port.group(1)} (a port is 1 to {MAX_PORT})"
    try:
        parts.port  # noqa: B018 (raises ValueError for what the pattern let through)
    except ValueError as exc:
        return f"malformed URL ({exc})"
    if not parts.hostname:
        return "no host"
    try:
        _CANONICAL.canonicalize(text)
    except InvalidURL as exc:
        return f"malformed URL ({exc})"
    return None


def guard_problem(url: str, policy: GuardPolicy) -> str | None:
    """Why the private-address guard will refuse ``url``, if that can be told
    without resolving its host (an IP literal, or ``localhost``); else None."""
    if not policy.enabled:
        return None
    host = (urlsplit(url.strip()).hostname or "").rstrip(".")
    if not host:
        return None
    if parse_address(host) is not None:
        reason = policy.refuses_literal(host)
        allow = f"{host}/32" if ":" not in host else f"{host}/128"
    elif host == LOCALHOST or host.endswith("." + LOCALHOST):
        reason = policy.refuses(host, "127.0.0.1")
        allow = "127.0.0.0/8"
    else:
        return None
    if reason is None:
        return None
    return (
        f"{host} is a {reason} address, which the guard refuses "
        f"(to crawl it: -s CRAWL_GUARD_ALLOW={allow})"
    )


class SeedCheck:
    """The seed rule of one worker: what is wrong with a seed, and its one
    WARNING line."""

    def __init__(self, stats: StatsCollector, policy: GuardPolicy) -> None:
        self.stats = stats
        self.policy = policy

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SeedCheck:
        assert crawler.stats is not None
        return cls(crawler.stats, GuardPolicy.from_settings(crawler.settings))

    def problem(self, url: str) -> str | None:
        """What keeps ``url`` from being crawled as a seed, or None."""
        return seed_problem(url) or guard_problem(url, self.policy)

    def warn(self, url: object, why: str) -> None:
        """The one line for a refused seed (the caller counts it)."""
        logger.warning("Seed %.300r not crawled: %s; the other seeds are crawled", url, why)

    def refuse(self, url: object, why: str) -> None:
        """Counts (``seeds/refused``) and says a refused seed."""
        self.stats.inc_value(SEEDS_REFUSED)
        self.warn(url, why)

    def accepts(self, url: str) -> bool:
        """Whether ``url`` may be a seed; if not, it is counted and said."""
        why = self.problem(url)
        if why is None:
            return True
        self.refuse(url, why)
        return False
