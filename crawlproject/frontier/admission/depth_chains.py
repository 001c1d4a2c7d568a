"""Chains of pages that bring nothing new: the depth guard's count.

``CRAWL_MAX_DEPTH`` bounds a chain of hops through pages that add no new
content (a calendar's next month, an empty archive's next page, a session's
copies), not the hops since the seed: a paginated listing whose every page
brings new content is followed to its end, however long.

A page *brings new content* unless the duplicate judgement
(middlewares/dedupe.py) found it a near or exact duplicate of another page of
its own host, or found it *thin* (a fingerprinted page with less than
``CRAWL_DEDUPE_MIN_TEXT_CHARS`` of visible text: an empty archive or calendar
page, too little text to be judged, and too little to be content). A page
without a judgement (no item, no dedupe, a content type that is not
fingerprinted, a failed check) is taken as new: the guard never cuts what it
cannot judge. A mirror's copy (its original on another host) is new content
for its host.

The count travels in ``request.meta[STALE_META_KEY]``: the links of a page
that brought new content start again from 0 (the key is absent: the
codec stores nothing for them), the links of one that did not carry the
page's count + 1. Admission (crawlproject/frontier/admission/admission.py) refuses a
link whose count exceeds ``CRAWL_MAX_DEPTH`` (``trap/max_depth``). Scrapy's
``meta["depth"]`` (DepthMiddleware, ``DEPTH_LIMIT``) keeps its meaning: hops
since the seed. The count is never larger than that depth, so the guard is
never stricter than a depth limit of the same value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STALE_META_KEY = "crawl_stale"  # hops since the last page that brought new content


def stale_hops(meta: Mapping[str, Any]) -> int:
    """A request's hops since the last page that brought new content (0: none)."""
    hops = meta.get(STALE_META_KEY, 0)
    return hops if isinstance(hops, int) and hops > 0 else 0


def beyond(meta: Mapping[str, Any], max_depth: int) -> bool:
    """Whether the depth guard refuses a request (``max_depth`` 0: off)."""
    return bool(max_depth) and stale_hops(meta) > max_depth


def mark_link(meta: dict[str, Any], page_meta: Mapping[str, Any], novel: bool) -> None:
    """Sets the count of a link (``meta``) found on a page (``page_meta``): 0 after a
    page that brought new content (no key), the page's count + 1 after one that
    did not."""
    if novel:
        meta.pop(STALE_META_KEY, None)
    else:
        meta[STALE_META_KEY] = stale_hops(page_meta) + 1
