"""The spider's scope: what a URL must share with a seed (its host, or its
registered domain) to be followed."""

from __future__ import annotations

from urllib.parse import urlsplit

from crawlproject.frontier.basics.urls import registered_domain


def scope_root_of(url: str, scope: str) -> str | None:
    """``url``'s scope root under ``scope`` (hosts, domains, any); None: unparsable."""
    try:
        parts = urlsplit(url)
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
