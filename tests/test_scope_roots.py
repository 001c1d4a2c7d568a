"""A URL's scope root is parsed once per netloc (spiders/scope.py): the same
answer as parsing the whole URL, for every kind of netloc."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from crawlproject.frontier.basics.urls import registered_domain
from spiders.scope import scope_root_of

URLS = [
    "http://Example.COM/a",
    "https://example.com:8443/a?b#c",
    "http://127.0.3.17:41234/p/12?a=1&b=2",
    "http://user:pw@Example.com:80/x",
    "http://[2001:DB8::1]:8080/x",
    "http://[2001:db8::1]/x",
    "http://[2001:db8::1/x",  # unbalanced bracket: unparsable
    "http://example.com:99999/x",  # port out of range
    "http://example.com:port/x",
    "http://example.com:/x",
    "http:///no-host",
    "mailto:someone@example.com",
    "//example.org/scheme-relative",
    "http://news.bbc.co.uk/x",
    "http://www.example.co.uk:81/x",
    "http://xn--bcher-kva.example/x",
    "http://exa mple.com/x",
    "",
]


def reference(url: str, scope: str) -> str | None:
    """scope_root_of as it was: the whole URL parsed for each call."""
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


@pytest.mark.parametrize("scope", ["hosts", "domains"])
def test_scope_root_as_from_the_whole_url(scope: str) -> None:
    for _ in range(2):  # the second time from the cache
        assert [scope_root_of(u, scope) for u in URLS] == [reference(u, scope) for u in URLS]
