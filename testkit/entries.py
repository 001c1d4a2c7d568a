"""Frontier entries made as the scheduler makes them, for tests and benchmarks
that call the frontier's scripts directly (RedisFrontier.add)."""

from __future__ import annotations

from scrapy import Request

from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.redis_frontier import NO_PATTERN, NO_VOTE, NewEntry
from crawlproject.rules.traps import token_shape, url_pattern

CANON = UrlCanonicalizer([])
CODEC = RequestCodec(["scrapy.http.request.Request"])


def entry(
    url: str,
    score: float = 0.0,
    *,
    dont_filter: bool = False,
    vote: bytes = NO_VOTE,
    credit_only: bool = False,
    pattern: bool = False,
    token: bool = False,
    canon: UrlCanonicalizer = CANON,
) -> NewEntry:
    """``url`` as a new entry (``score``: its priority, or its credit in credit
    mode). ``pattern`` / ``token``: with its URL shape / token shape, as the
    scheduler sets them when those trap guards are on."""
    canonical = canon.canonicalize(url)
    return NewEntry(
        pkey=host_key(canonical),
        fingerprint=canon.fingerprint(canonical),
        dont_filter=dont_filter,
        data=b"" if credit_only else CODEC.encode(Request(url, dont_filter=dont_filter), None),
        score=score,
        pattern=(url_pattern(canonical) or NO_PATTERN) if pattern else NO_PATTERN,
        credit_only=credit_only,
        token_shape=(token_shape(canonical) or NO_PATTERN) if token else NO_PATTERN,
        vote=vote,
    )
