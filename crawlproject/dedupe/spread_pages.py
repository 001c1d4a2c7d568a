"""A batch's pages in the spread duplicate index, and what is worked out on
them without a round trip: near copies within the batch, the calls that
record and look up originals, and the originals read from their replies.
The round trips themselves: crawlproject/dedupe/spread_index.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from crawlproject.dedupe.calls import Call
from crawlproject.dedupe.spread import Spread
from crawlproject.hamming import hamming

SAME_URL = 3  # a page's kind when its original is its own URL (spread_tally.lua)
# An exact copy whose body's URL was never recorded: the worker that stored the
# body died (or lost Redis) between the exact check and the record, so the page
# was never kept and its links never followed; or that record is still a round
# trip away. Kept as new (its URL recorded, its SimHash added, tallied as new:
# its judge's tally never ran), if still so after UNRECORDED_WAITS.
UNRECORDED = 4
# Seconds between asking again for an UNRECORDED page's original: its judge
# records it one round trip after storing the body unless dead (or Redis is).
UNRECORDED_WAITS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


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
    kind: int = -1  # 0 new, 1 exact, 2 near, 3 (SAME_URL) its own URL again, 4 UNRECORDED
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
            plain.append(_record(spread, page))
    for page in pages:
        if page.kind == 1:  # same body: recorded under its SimHash or its digest
            page.ids = [page.sim8, page.digest[:8]] if page.sim8 else [page.digest[:8]]
        elif page.kind == 2 and page.near_url is None:
            page.ids = [page.near_fp]
        elif page.kind == 2:
            page.original = page.near_url
        if page.ids:
            lookups.append((page, len(plain)))
            plain += _lookups(spread, page)
    return plain, lookups


def _record(spread: Spread, page: Page) -> Call:
    """The HSETNX that records a kept page's URL under its SimHash (or digest)."""
    okey, fid = spread.originals_of(page.sim8 or page.digest[:8])
    return Call(None, [okey], [fid, page.url], "HSETNX", resend=True)


def _lookups(spread: Spread, page: Page) -> list[Call]:
    """The HGETs of a duplicate's original URL, one per id it may be under."""
    calls = []
    for page_id in page.ids:
        okey, fid = spread.originals_of(page_id)
        calls.append(Call(None, [okey], [fid], "HGET", resend=True))
    return calls


def take_originals(replies: list[Any], lookups: list[tuple[Page, int]]) -> list[RedisError]:
    """Sets each looked-up duplicate's original URL from the replies of
    ``originals_calls``' calls (an exact copy none of whose ids holds a URL:
    UNRECORDED); returns the replies that failed."""
    for page, at in lookups:
        got = replies[at : at + len(page.ids)]
        found = [r for r in got if r is not None and not isinstance(r, RedisError)]
        if found:
            url = found[0]
            page.original = url.decode("utf-8", "replace") if isinstance(url, bytes) else url
        elif page.kind == 1 and all(r is None for r in got):
            page.kind = UNRECORDED
    return [r for r in replies if isinstance(r, RedisError)]


async def settle_unrecorded(
    spread: Spread, pages: list[Page], send: Callable[..., Awaitable[list[Any]]]
) -> list[RedisError]:
    """UNRECORDED pages: the worker that stored their body may be a round trip
    from recording its URL (then each is its copy, as of two copies exactly one
    is new), so they are asked again over UNRECORDED_WAITS. Those still without
    one were never kept (their judge died): kept as new, their URLs recorded
    for later copies. Returns the calls that failed (a failed lookup leaves the
    page an exact copy of an unnamed page, as before)."""
    failed: list[RedisError] = []
    for wait in UNRECORDED_WAITS:
        await asyncio.sleep(wait)
        calls: list[Call] = []
        lookups: list[tuple[Page, int]] = []
        for page in pages:
            page.kind = 1
            lookups.append((page, len(calls)))
            calls += _lookups(spread, page)
        failed += take_originals(await send(calls, raise_errors=False), lookups)
        pages = [page for page in pages if page.kind == UNRECORDED]
        if not pages:
            return failed
    replies = await send([_record(spread, page) for page in pages], raise_errors=False)
    return failed + [r for r in replies if isinstance(r, RedisError)]
