"""The guard's two ways of saying no (see :mod:`crawlproject.guard.policy`).

* :class:`BlockedAddressError`: the resolver's answer, a ``DNSLookupError``, so
  that Twisted fails the connection attempt before any connect. What reaches
  Scrapy is a plain DNS failure (Twisted's ``HostnameEndpoint`` reports "no
  results for hostname lookup", which Scrapy re-raises as
  ``CannotResolveHostError``), so the resolver keeps its refusals
  (``CachingResolver.refusal``) for :func:`refusal_of` to ask.
* :class:`BlockedAddress`: the request is dropped (``IgnoreRequest``), raised by
  the guard middleware before a download and by robots.txt handling.

:func:`refusal_of` tells either apart from other failures, through Scrapy's
and Twisted's wrapping.
"""

from __future__ import annotations

from scrapy.exceptions import CannotResolveHostError, IgnoreRequest
from scrapy.utils.reactor import is_reactor_installed
from twisted.internet.error import DNSLookupError


class BlockedAddressError(DNSLookupError):
    """A name resolved to an address the guard refuses (no connection made)."""

    def __init__(self, name: str, address: str, reason: str) -> None:
        super().__init__(f"{name!r} resolves to a {reason} address ({address}): refused")
        self.name = name
        self.address = address
        self.reason = reason


class BlockedAddress(IgnoreRequest):
    """The request's address is refused by the guard (``CRAWL_GUARD_ALLOW``)."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host} is a {reason} address: refused (CRAWL_GUARD_ALLOW)")
        self.host = host
        self.reason = reason


def refusal_of(exc: BaseException | None, host: str | None = None) -> str | None:
    """The guard's reason if ``exc`` (or what it was raised from) is a refusal
    by the guard, or a DNS failure of ``host`` (the request's host name) that
    the installed resolver refused; None for any other failure."""
    first, seen = exc, 0
    while exc is not None and seen < 10:
        if isinstance(exc, BlockedAddress | BlockedAddressError):
            return exc.reason
        exc = exc.__cause__
        seen += 1
    if host and isinstance(first, CannotResolveHostError | DNSLookupError):
        refusal = getattr(installed_resolver(), "refusal", None)
        blocked = refusal(host) if callable(refusal) else None
        if isinstance(blocked, BlockedAddressError):
            return blocked.reason
    return None


def installed_resolver() -> object:
    """The resolver the running reactor uses (``reactor.resolver``, which Scrapy's
    TWISTED_DNS_RESOLVER installs), or None before a reactor is installed."""
    if not is_reactor_installed():  # never install one as a side effect
        return None
    from twisted.internet import reactor

    return getattr(reactor, "resolver", None)
