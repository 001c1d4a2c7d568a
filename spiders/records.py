"""The fetch record: what the crawl keeps about each fetch, a page's (the
spider's ``parse``) and a failed one's (its errback) alike.

A page's record also carries the duplicate verdict (``content_sha1``,
``simhash``; for a copy ``dedupe``, ``duplicate_of``, ``dedupe_distance``),
written by middlewares/dedupe.py because the ``web`` spider declares
``fetch_records = True`` (crawlproject/dedupe/verdict.py); a copy's record is
then dropped by pipelines/dedupe.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from scrapy.http import Response

from crawlproject.store.hops import redirect_summary

# Keys of the fetch record a content processor's fields may not replace.
RECORD_KEYS = frozenset(
    {"url", "final_url", "fetched_at", "status", "depth", "content_type", "length", "redirects"}
)


def fetch_record(
    meta: Mapping[str, Any],
    url: str,
    response: Response | None,
    extra: Mapping[str, Any],
    redirects_to: str,
) -> dict[str, Any]:
    """The record of a fetch of ``url`` (``response`` None: no answer): "url"
    is the URL as requested (before redirects), "final_url" where the answer
    came from; then ``extra``, then the redirect hops (to ``redirects_to``)."""
    redirected_from = meta.get("redirect_urls") or ()
    record: dict[str, Any] = {
        "url": redirected_from[0] if redirected_from else url,
        "final_url": response.url if response is not None else url,
        "fetched_at": now_iso(),
        "status": response.status if response is not None else None,
        "depth": meta.get("depth", 0),
        "content_type": (response.headers.get("Content-Type") or b"").decode("latin-1")
        if response is not None
        else None,
        "length": len(response.body) if response is not None else None,
        **extra,
    }
    if redirected_from:
        record["redirects"] = redirects_of(meta, redirects_to)
    return record


def redirects_of(meta: Mapping[str, Any], final_url: str) -> list[dict[str, Any]]:
    """The fetch record's ``redirects``: ``{url, status, location}`` per hop."""
    return redirect_summary(
        meta.get("redirect_urls") or (), meta.get("redirect_reasons") or (), final_url
    )


def now_iso() -> str:
    # When the answer (or the failure) reached the spider: the fetch record's time.
    return datetime.now(UTC).isoformat(timespec="microseconds")
