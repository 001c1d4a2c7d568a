"""Canonical URLs, their fixed-size fingerprints, and politeness keys.

The seen-URL test compares canonical URLs, so ``HTTP://Example.com:80/a?b=2&a=1#x``
and ``http://example.com/a?a=1&b=2`` are one URL. Canonicalization is w3lib's
(percent-encoding normalised, query sorted, fragment dropped) plus: lowercase
host, default port removed, session-id parameters removed from the query and
from ``;param=`` path segments.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

import tldextract
from w3lib.url import canonicalize_url

DEFAULT_PORTS = {"http": 80, "https": 443}
FINGERPRINT_BYTES = 8


class InvalidURL(ValueError):
    """The URL cannot be crawled (no host, unsupported scheme, unparsable)."""


class UrlCanonicalizer:
    """Turns URLs into canonical strings and 8-byte fingerprints."""

    def __init__(self, session_params: Iterable[str]) -> None:
        names = sorted({p.lower() for p in session_params})
        self._session_params = frozenset(names)
        self._path_param_re = (
            re.compile(r";(?:" + "|".join(re.escape(n) for n in names) + r")=[^/;?]*", re.I)
            if names
            else None
        )

    def canonicalize(self, url: str) -> str:
        try:
            # The host as written: w3lib 2.6 canonicalizes ``http:///path`` into
            # ``http://path/``, a host the link never named.
            if not urlsplit(url).netloc:
                raise InvalidURL(f"not an http(s) URL with a host: {url!r}")
            canonical = canonicalize_url(url, keep_fragments=False)
            parts = urlsplit(canonical)
            port = parts.port
        except ValueError as exc:
            raise InvalidURL(f"unparsable URL {url!r}: {exc}") from exc
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        if scheme not in DEFAULT_PORTS or not host:
            raise InvalidURL(f"not an http(s) URL with a host: {url!r}")
        netloc = host if ":" not in host else f"[{host}]"
        if port is not None and port != DEFAULT_PORTS[scheme]:
            netloc = f"{netloc}:{port}"
        path = parts.path or "/"
        if self._path_param_re is not None and ";" in path:
            path = self._path_param_re.sub("", path)
        query = parts.query
        if query and self._session_params:
            kept = [
                pair
                for pair in query.split("&")
                if pair.split("=", 1)[0].lower() not in self._session_params
            ]
            query = "&".join(kept)
        return urlunsplit((scheme, netloc, path, query, ""))

    def fingerprint(self, canonical_url: str, method: str = "GET", body: bytes = b"") -> bytes:
        """8 bytes of BLAKE2b over method, canonical URL and body.

        64 bits: about 6 expected collisions over 15 billion URLs.
        """
        h = hashlib.blake2b(digest_size=FINGERPRINT_BYTES)
        if method != "GET" or body:
            h.update(method.encode("ascii", "replace") + b" ")
            h.update(hashlib.sha1(body).digest())
        h.update(canonical_url.encode("utf-8", "surrogatepass"))
        return h.digest()


@lru_cache(maxsize=1)
def _tld_extractor() -> tldextract.TLDExtract:
    # The suffix list snapshot bundled with tldextract: never fetched at run time.
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def registered_domain(host: str) -> str:
    """``a.b.example.co.uk`` -> ``example.co.uk``; IPs and bare names unchanged."""
    return _tld_extractor()(host).top_domain_under_public_suffix or host


# Ports that are the host itself in a politeness key: http's and https's
# defaults, so ``http://h/`` and ``https://h/`` (and ``http://h:443/``) are one
# server, one slot. Any other port is another server (``h:8080``).
SERVER_DEFAULT_PORTS = frozenset(DEFAULT_PORTS.values())


def host_key(canonical_url: str) -> str:
    """Politeness key by server: ``host`` or ``host:port`` of a canonical URL
    (an IPv6 host in brackets). The scheme is not part of it: http and https
    of one host are the same machine; a port other than 80 and 443 is kept."""
    parts = urlsplit(canonical_url)
    host = parts.hostname or ""
    netloc = host if ":" not in host else f"[{host}]"
    port = parts.port
    if port is not None and port not in SERVER_DEFAULT_PORTS:
        netloc = f"{netloc}:{port}"
    return netloc


def domain_key(canonical_url: str) -> str:
    """Politeness key by registered domain (all schemes and ports share it)."""
    return registered_domain(urlsplit(canonical_url).hostname or "")


def origin_of(scheme: str, host: str, port: int | None) -> str:
    """``scheme://host[:port]`` (the port only when not the scheme's default;
    an IPv6 host in brackets): a robots.txt origin (RFC 9309)."""
    netloc = host.lower() if ":" not in host else f"[{host.lower()}]"
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    return f"{scheme}://{netloc}"
