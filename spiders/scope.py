"""The spider's scope: what a URL must share with a seed (its host, or its
registered domain) to be followed."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

from crawlproject.frontier.basics.urls import registered_domain

# Netlocs whose scope root is remembered: a page's links mostly share a few.
ROOTS_CACHED = 4096


def scope_root_of(url: str, scope: str) -> str | None:
    """``url``'s scope root under ``scope`` (hosts, domains, any); None: unparsable."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return None
    return _root_of_netloc(netloc, scope)


@lru_cache(maxsize=ROOTS_CACHED)
def _root_of_netloc(netloc: str, scope: str) -> str | None:
    # Host and port depend on the netloc alone: parsed once per netloc, not
    # once per link (hostname and port each parse it again: ~3 us a link of a
    # CPU-bound worker's ~8 links a page).
    try:
        parts = urlsplit("//" + netloc)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    if scope == "domains":
        return registered_domain(host)
    return f"{host}:{port}" if port else host


def is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
