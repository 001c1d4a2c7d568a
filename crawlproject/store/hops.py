"""Redirect hops: the 3xx responses of a redirect chain, kept for the WARC file.

Scrapy's RedirectMiddleware follows a redirect inside the downloader, so only
the chain's last response reaches the spider. middlewares/redirect_hops.py
records each 3xx it will follow as a *hop* in the request's meta
(:data:`~crawlproject.store.config.REDIRECT_HOPS_META_KEY`), which
RedirectMiddleware copies into the next request; the storage pipeline writes
each hop as its own response (and request) record before the page's.

The next request is stored in the frontier's Redis as JSON before it is
fetched (crawlproject/frontier/codec.py), maybe by another worker, so a hop is
a JSON-safe dict and bounded, whatever the server sent:

* ``url``, ``status``, ``fetched_at`` (ISO 8601), ``ip`` (if known), ``method``;
* ``headers`` and ``request_headers``: ``[name, value]`` pairs (latin-1 text
  of the raw bytes, as the codec keeps request headers), at most
  :data:`HEADER_MAX_LINES` lines and :data:`HEADERS_MAX_CHARS` /
  :data:`REQUEST_HEADERS_MAX_CHARS` characters; ``Location`` is kept first, the
  other lines in order while they fit, the rest dropped;
* ``body``: base64, as the codec stores bodies (unambiguous for any byte,
  4/3 of the size: at most ~5.5 KB). Only a body of at most
  :data:`BODY_MAX_BYTES` is kept. HttpCompressionMiddleware has not decoded it
  yet at this point: a gzip or deflate body is decoded here (cheap at this
  size, and capped), stored decoded like a page's, its ``Content-Encoding``
  header kept (the WARC writer renames it ``X-Crawler-Content-Encoding``).
  Any other body is left out (``truncated``: ``"length"`` when too large,
  ``"unspecified"`` when its encoding is not decoded here: br, zstd, stacked
  or corrupt), which the record says with ``WARC-Truncated``. Redirect bodies
  are tiny HTML ("Moved here"), so in practice all are kept.

A hop is then about 0.5-1 KB of Redis per queued redirect (at worst ~12 KB),
at most :data:`MAX_HOPS` per chain (REDIRECT_MAX_TIMES ends chains sooner).
The hop's URL is the request's own URL, which the stored request holds anyway
(CRAWL_MAX_URL_LENGTH bounds it). :func:`parse_hops` reads hops back
defensively: meta comes from Redis, so a malformed entry is skipped.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

BODY_MAX_BYTES = 4096
HEADER_MAX_LINES = 48
HEADERS_MAX_CHARS = 4096  # names + values of the response headers
REQUEST_HEADERS_MAX_CHARS = 2048  # our own headers (and cookies): a few hundred chars
MAX_HOPS = 10

TRUNCATED_LENGTH = "length"  # WARC-Truncated values (WARC/1.1, section 5.13)
TRUNCATED_UNSPECIFIED = "unspecified"

# Kept before the other header lines: a hop without it cannot be replayed.
_FIRST_HEADERS = frozenset({"location"})
_GZIP_CODINGS = frozenset({"gzip", "x-gzip"})


@dataclass(frozen=True, slots=True)
class Hop:
    """A hop read back from meta (:func:`parse_hops`)."""

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    fetched_at: str
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
    fetched_at: str,
    method: str = "GET",
    request_headers: Iterable[tuple[str, str]] = (),
    ip: str | None = None,
) -> dict[str, Any]:
    """The JSON-safe, bounded hop record of one 3xx answer (module doc).
    ``headers`` as received (latin-1 text), ``body`` as on the wire."""
    headers = list(headers)
    kept_body, truncated = hop_body(body, _content_encoding(headers))
    hop: dict[str, Any] = {
        "url": url,
        "status": status,
        "fetched_at": fetched_at,
        "method": method,
        "headers": bound_headers(headers, HEADERS_MAX_CHARS),
        "request_headers": bound_headers(request_headers, REQUEST_HEADERS_MAX_CHARS),
    }
    if kept_body is not None:
        hop["body"] = base64.b64encode(kept_body).decode("ascii")
    if truncated is not None:
        hop["truncated"] = truncated
    if ip:
        hop["ip"] = ip
    return hop


def appended(hops: object, hop: dict[str, Any]) -> list[Any]:
    """A new list: ``hops`` (the meta value, maybe absent) with ``hop`` added,
    unless the chain has MAX_HOPS already. New, not appended in place: the
    previous request's meta shares the old list."""
    previous = list(hops) if isinstance(hops, list) else []
    return previous if len(previous) >= MAX_HOPS else [*previous, hop]


def bound_headers(headers: Iterable[tuple[str, str]], max_chars: int) -> list[list[str]]:
    """``[name, value]`` pairs within HEADER_MAX_LINES and ``max_chars``
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
    return [[lines[i][0], lines[i][1]] for i in sorted(kept)]


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


def parse_hops(value: object) -> list[Hop]:
    """The hops of a meta value; malformed entries (meta comes from Redis) are skipped."""
    if not isinstance(value, list):
        return []
    hops = []
    for entry in value[:MAX_HOPS]:
        hop = _parse_hop(entry)
        if hop is not None:
            hops.append(hop)
    return hops


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


def _parse_hop(entry: object) -> Hop | None:
    if not isinstance(entry, dict):
        return None
    url, status, fetched_at = entry.get("url"), entry.get("status"), entry.get("fetched_at")
    if not isinstance(url, str) or not isinstance(fetched_at, str):
        return None
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 999:
        return None
    headers = _pairs(entry.get("headers"))
    request_headers = _pairs(entry.get("request_headers", []))
    if headers is None or request_headers is None:
        return None
    body = b""
    raw = entry.get("body", "")
    try:
        body = base64.b64decode(raw, validate=True) if isinstance(raw, str) else b""
    except (binascii.Error, ValueError):
        return None
    method = entry.get("method", "GET")
    ip = entry.get("ip")
    truncated = entry.get("truncated")
    return Hop(
        url=url,
        status=status,
        headers=headers,
        body=body,
        fetched_at=fetched_at,
        method=method if isinstance(method, str) and method else "GET",
        request_headers=request_headers,
        ip=ip if isinstance(ip, str) else None,
        truncated=truncated if isinstance(truncated, str) else None,
    )


def _pairs(value: object) -> list[tuple[str, str]] | None:
    if not isinstance(value, list):
        return None
    pairs = []
    for pair in value:
        if not isinstance(pair, list) or len(pair) != 2:
            return None
        name, value = pair
        if not isinstance(name, str) or not isinstance(value, str):
            return None
        pairs.append((name, value))
    return pairs


def _content_encoding(headers: Iterable[tuple[str, str]]) -> str:
    return ", ".join(v for n, v in headers if n.lower() == "content-encoding")
