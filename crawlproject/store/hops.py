"""Redirect hops: the 3xx answers of a redirect chain, kept for the WARC file.

Scrapy's RedirectMiddleware follows a redirect inside the downloader, so only
the chain's last response reaches the spider. middlewares/redirect_hops.py
builds a *hop* (:func:`build_hop`) of each 3xx it will follow and sends it
with the ``redirect_received`` signal (crawlproject/store/signals.py); the
storage pipeline writes it at once as its own response (and request) record,
as Heritrix does: each 3xx is archived when it is received, whatever happens
to its target (already crawled, failed, not stored). Nothing of it goes into
the next request's meta, so the frontier's Redis holds no more per redirect.

A hop is bounded, whatever the server sent:

* ``headers`` and ``request_headers``: at most :data:`HEADER_MAX_LINES` lines
  and :data:`HEADERS_MAX_CHARS` / :data:`REQUEST_HEADERS_MAX_CHARS`
  characters (latin-1 text of the raw bytes); ``Location`` is kept first, the
  other lines in order while they fit, the rest dropped;
* ``body``: only a body of at most :data:`BODY_MAX_BYTES` is kept.
  HttpCompressionMiddleware has not decoded it yet at this point: a gzip or
  deflate body is decoded here (cheap at this size, and capped), stored
  decoded like a page's, its ``Content-Encoding`` header kept (the WARC writer
  renames it ``X-Crawler-Content-Encoding``). Any other body is left out
  (``truncated``: ``"length"`` when too large, ``"unspecified"`` when its
  encoding is not decoded here: br, zstd, stacked or corrupt), which the
  record says with ``WARC-Truncated``. Redirect bodies are tiny HTML ("Moved
  here"), so in practice all are kept.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

BODY_MAX_BYTES = 4096
HEADER_MAX_LINES = 48
HEADERS_MAX_CHARS = 4096  # names + values of the response headers
REQUEST_HEADERS_MAX_CHARS = 2048  # our own headers (and cookies): a few hundred chars

TRUNCATED_LENGTH = "length"  # WARC-Truncated values (WARC/1.1, section 5.13)
TRUNCATED_UNSPECIFIED = "unspecified"
TRUNCATED_DISCONNECT = "disconnect"  # a page's body cut short by its connection

# Kept before the other header lines: a hop without it cannot be replayed.
_FIRST_HEADERS = frozenset({"location"})
_GZIP_CODINGS = frozenset({"gzip", "x-gzip"})


@dataclass(frozen=True, slots=True)
class Hop:
    """One 3xx answer, bounded (:func:`build_hop`)."""

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes  # decoded; empty when left out (``truncated`` says why)
    fetched_at: datetime
    method: str = "GET"
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    ip: str | None = None
    truncated: str | None = None  # the WARC-Truncated reason, when the body was left out

    @property
    def location(self) -> str | None:
        return next((v for n, v in self.headers if n.lower() == "location"), None)


def build_hop(
    url: str,
    status: int,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    fetched_at: datetime,
    method: str = "GET",
    request_headers: Iterable[tuple[str, str]] = (),
    ip: str | None = None,
) -> Hop:
    """The bounded hop of one 3xx answer (module doc). ``headers`` as
    received (latin-1 text), ``body`` as on the wire."""
    headers = list(headers)
    kept_body, truncated = hop_body(body, _content_encoding(headers))
    return Hop(
        url=url,
        status=status,
        headers=bound_headers(headers, HEADERS_MAX_CHARS),
        body=kept_body if kept_body is not None else b"",
        fetched_at=fetched_at,
        method=method,
        request_headers=bound_headers(request_headers, REQUEST_HEADERS_MAX_CHARS),
        ip=ip or None,
        truncated=truncated,
    )


def bound_headers(headers: Iterable[tuple[str, str]], max_chars: int) -> list[tuple[str, str]]:
    """(name, value) pairs within HEADER_MAX_LINES and ``max_chars``
    (names and values counted): Location first, then the others in order
    while they fit; the result keeps the original order."""
    lines = list(headers)
    order = sorted(range(len(lines)), key=lambda i: lines[i][0].lower() not in _FIRST_HEADERS)
    kept: set[int] = set()
    used = 0
    for i in order:
        name, value = lines[i]
        cost = len(name) + len(value)
        if len(kept) < HEADER_MAX_LINES and used + cost <= max_chars:
            kept.add(i)
            used += cost
    return [(lines[i][0], lines[i][1]) for i in sorted(kept)]


def hop_body(body: bytes, content_encoding: str) -> tuple[bytes | None, str | None]:
    """(body to store, decoded; None if left out), (WARC-Truncated reason or None)."""
    if len(body) > BODY_MAX_BYTES:
        return None, TRUNCATED_LENGTH
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings or not body:
        return body, None
    if len(codings) > 1 or codings[0] not in (*_GZIP_CODINGS, "deflate"):
        return None, TRUNCATED_UNSPECIFIED
    wbits = (31,) if codings[0] in _GZIP_CODINGS else (15, -15)  # deflate: zlib, or raw
    for bits in wbits:
        inflater = zlib.decompressobj(bits)
        try:
            out = inflater.decompress(body, BODY_MAX_BYTES + 1)
        except zlib.error:
            continue
        if len(out) > BODY_MAX_BYTES:
            return None, TRUNCATED_LENGTH
        if inflater.eof:
            return out, None
    return None, TRUNCATED_UNSPECIFIED


def redirect_summary(
    redirect_urls: Sequence[object], redirect_reasons: Sequence[object], final_url: str
) -> list[dict[str, Any]]:
    """The fetch record's ``redirects``: ``{url, status, location}`` per hop of
    Scrapy's chain (meta ``redirect_urls``/``redirect_reasons``); ``location``
    is where the hop led (absolute), ``status`` None for a ``<meta refresh>``."""
    urls = [str(u) for u in redirect_urls]
    targets = [*urls[1:], final_url]
    reasons = list(redirect_reasons)
    summary = []
    for i, url in enumerate(urls):
        reason = reasons[i] if i < len(reasons) else None
        status = reason if isinstance(reason, int) and not isinstance(reason, bool) else None
        summary.append({"url": url, "status": status, "location": targets[i]})
    return summary


def _content_encoding(headers: Iterable[tuple[str, str]]) -> str:
    return ", ".join(v for n, v in headers if n.lower() == "content-encoding")
