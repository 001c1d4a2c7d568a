"""``CRAWL_HOST_OVERRIDES`` keys, turned into the politeness keys they mean.

The frontier keeps a host's own delay and concurrency under its politeness key
(crawlproject/frontier/basics/urls.py): the server, ``host`` or ``host:port`` (the
port only when it is not 80 or 443: http and https of one host share one
slot), with ``CRAWL_POLITENESS_KEY = "host"`` or ``"address"`` (whose queues
are still per host); the registered domain with ``"domain"``. An override must
name such a key, or it silently matches nothing. Accepted, with the host keys:

* ``example.com``: the host under either scheme's default port, i.e. the key
  ``example.com``;
* ``example.com:8080``: that port (under either scheme);
* ``https://example.com`` / ``http://example.com:8080``: the same keys written
  as URLs (a trailing ``/`` is allowed, a default port is dropped, the host
  lowercased and IDNA-encoded as URLs are). Such an entry wins over a bare
  host's for its key; ``http://`` and ``https://`` entries of one server with
  different values are refused (they are one slot).

With the ``domain`` key, a registered domain (``example.com``, ``example.co.uk``,
an IP address). Anything else (a path, a wildcard, a scheme other than http(s),
``www.example.com`` under the ``domain`` key) is refused with one line saying
what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from crawlproject.frontier.basics.urls import (
    DEFAULT_PORTS,
    InvalidURL,
    UrlCanonicalizer,
    host_key,
    registered_domain,
)
from crawlproject.setting_values import ConfigError

_CANONICAL = UrlCanonicalizer(())
# A host, optionally with a port: no path, query, credentials or wildcard.
_HOST_PORT = re.compile(r"(?:\[[0-9a-f:.]+\]|[^\s/?#@\[\]:*]+)(?::\d{1,5})?", re.I)


class OverrideKeyError(ValueError):
    """A key that names no politeness key."""


@dataclass(frozen=True)
class HostOverride:
    delay_seconds: float | None
    concurrency: int | None


def read_host_overrides(raw: Mapping[str, Any], politeness: str) -> dict[str, HostOverride]:
    """``CRAWL_HOST_OVERRIDES`` by politeness key. A scheme://host key wins
    over a bare host's for its key; ConfigError (one line) for a bad entry."""
    overrides: dict[str, HostOverride] = {}
    by_url: dict[str, tuple[str, HostOverride]] = {}  # pkey -> the scheme://host entry for it
    # Bare hosts first, so that a scheme://host[:port] entry replaces theirs.
    for key, spec in sorted(raw.items(), key=lambda kv: "://" in str(kv[0])):
        if not isinstance(spec, dict) or not spec or not set(spec) <= {"delay", "concurrency"}:
            raise ConfigError(
                f"CRAWL_HOST_OVERRIDES[{key!r}] must be a dict with 'delay' and/or "
                f"'concurrency', got {spec!r}"
            )
        try:
            pkeys = politeness_keys(str(key), politeness)
            delay, conc = spec.get("delay"), spec.get("concurrency")
            override = HostOverride(
                None if delay is None else float(delay), None if conc is None else int(conc)
            )
        except (OverrideKeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"CRAWL_HOST_OVERRIDES: {exc}") from None
        for pkey in pkeys:
            if "://" in str(key):
                other = by_url.get(pkey)
                if other is not None and other[1] != override:
                    raise ConfigError(
                        f"CRAWL_HOST_OVERRIDES: {other[0]!r} and {key!r} name one server "
                        f"({pkey}: http and https of a host share one slot); give one entry"
                    )
                by_url[pkey] = (str(key), override)
            overrides[pkey] = override
    return overrides


def politeness_keys(key: str, politeness: str) -> list[str]:
    """The politeness keys override key ``key`` applies to (see the module
    docstring); OverrideKeyError with the reason if it cannot be read."""
    text = key.strip()
    if politeness == "domain":
        return [_domain_key(key, text)]
    if "://" in text:
        scheme = text.split("://", 1)[0].lower()
        rest = text.split("://", 1)[1]
        if scheme not in DEFAULT_PORTS:
            raise OverrideKeyError(f"{key!r}: only http:// and https:// keys are crawled")
        rest = rest[:-1] if rest.endswith("/") else rest
        if not _HOST_PORT.fullmatch(rest):
            raise OverrideKeyError(
                f"{key!r} is not scheme://host[:port] (no path, query, credentials or wildcard)"
            )
        return [_key_of(key, f"{scheme}://{rest}/")]
    if not _HOST_PORT.fullmatch(text):
        raise OverrideKeyError(
            f"{key!r} is neither a host (example.com), host:port nor scheme://host[:port]"
        )
    return [_key_of(key, f"http://{text}/")]


def _key_of(key: str, url: str) -> str:
    try:
        canonical = _CANONICAL.canonicalize(url)
    except InvalidURL as exc:
        raise OverrideKeyError(f"{key!r}: {exc}") from None
    return host_key(canonical)


def _domain_key(key: str, text: str) -> str:
    host = text.lower().rstrip(".")
    has_port = ":" in (host.rsplit("]", 1)[-1] if host.startswith("[") else host)
    if not _HOST_PORT.fullmatch(host) or has_port:
        raise OverrideKeyError(
            f"{key!r}: with CRAWL_POLITENESS_KEY='domain' a key is a registered domain "
            "(example.com), without scheme or port"
        )
    hostname = urlsplit(_key_of(key, f"http://{host}/")).hostname or host
    domain = registered_domain(hostname)
    if domain != hostname:
        raise OverrideKeyError(
            f"{key!r}: with CRAWL_POLITENESS_KEY='domain' the whole registered domain shares "
            f"one politeness key: write {domain!r}"
        )
    return domain
