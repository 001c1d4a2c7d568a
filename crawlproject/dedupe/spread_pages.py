"""A batch's pages in the spread duplicate index, and what is worked out on
them without a round trip: near copies within the batch, the calls that
record and look up originals, and the originals read from their replies.
The round trips themselves: crawlproject/dedupe/spread_index.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from crawlproject.dedupe.calls import Call
from crawlproject.dedupe.spread import Spread
from crawlproject.hamming import hamming

SAME_URL = 3  # a page's kind when its original is its own URL (spread_tally.lua)


@dataclass
class Page:
    digest: bytes
    simhash: int | None
    url: str
    host: str
    sim8: bytes = b""
    near: int = -1  # distance to the nearest stored page (-1: none within k)
    near_fp: bytes = b""  # that page's SimHash
    near_url: str | None = None  # its URL, when it is an earlier page of this batch
    kind: int = -1  # 0 new, 1 exact, 2 near, 3 (SAME_URL) its own URL again
    streak: int = 0
    original: str | None = None
    ids: list[bytes] = field(default_factory=list)  # original URL looked up by these


def near_in_batch(pages: list[Page], k: int) -> None:
    """A page with no near copy stored may have one earlier in the batch
    (not stored yet): judged one after the other, it is near that page."""
    earlier: list[tuple[int, Page]] = []  # (SimHash, page): candidates to be new
    for page in pages:
        if page.simhash is None:
            continue
        for simhash, other in earlier:
            distance = hamming(simhash, page.simhash)
            if distance <= k and (page.near < 0 or distance < page.near):
                page.near, page.near_fp, page.near_url = distance, other.sim8, other.url
        if page.near < 0:
            earlier.append((page.simhash, page))


def originals_calls(spread: Spread, pages: list[Page]) -> tuple[list[Call], list[tuple[Page, int]]]:
    """The calls that record the new pages' URLs (HSETNX) and read the
    duplicates' originals (HGET), writes first (a duplicate of a page of
    this batch finds its URL); and per duplicate looked up, (page, index of
    its first HGET)."""
    plain: list[Call] = []
    lookups: list[tuple[Page, int]] = []
    for page in pages:
        if page.kind == 0:
            okey, fid = spread.originals_of(page.sim8 or page.digest[:8])
            plain.append(Call(None, [okey], [fid, page.url], "HSETNX", resend=True))
    for page in pages:
        if page.kind == 1:  # same body: recorded under its SimHash or its digest
            page.ids = [page.sim8, page.digest[:8]] if page.sim8 else [page.digest[:8]]
        elif page.kind == 2 and page.near_url is None:
            page.ids = [page.near_fp]
        elif page.kind == 2:
            page.original = page.near_url
        if page.ids:
            lookups.append((page, len(plain)))
            for page_id in page.ids:
                okey, fid = spread.originals_of(page_id)
                plain.append(Call(None, [okey], [fid], "HGET", resend=True))
    return plain, lookups


def take_originals(replies: list[Any], lookups: list[tuple[Page, int]]) -> list[RedisError]:
    """Sets each looked-up duplicate's original URL from the replies of
    ``originals_calls``' calls; returns the replies that failed."""
    for page, at in lookups:
        got = replies[at : at + len(page.ids)]
        found = [r for r in got if r is not None and not isinstance(r, RedisError)]
        if found:
            url = found[0]
            page.original = url.decode("utf-8", "replace") if isinstance(url, bytes) else url
    return [r for r in replies if isinstance(r, RedisError)]
