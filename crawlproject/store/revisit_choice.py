"""What the storage pipeline writes for a page whose payload the fleet stored
before (``CRAWL_STORE_DUPLICATES``), and for a recrawl's ``304 Not Modified``.

The duplicate filter's verdict does not decide what is archived (but with
``"none"``): a near copy is other bytes, stored whole; an exact copy's bytes
are in the index, so it is a revisit.

* ``"revisit"`` (default): a 2xx with a body whose payload is in
  the index (revisits.py) becomes a revisit record of profile
  identical-payload-digest, with the page's own status line and headers
  (pywb replays them with the original's body); the first is indexed and
  stored whole. A 304 becomes a revisit of profile server-not-modified naming
  the original of the URL's last 2xx body (the recrawl state's digest), with
  no HTTP head, so that a replay tool serves the original's status, headers
  and body (pywb 2.10 takes a revisit's own head when it has one: a 304's
  would replay as an empty 304). A 304 whose original is not in the index (it
  was not stored: another content type, CRAWL_STORE_STATUSES) is stored as
  the 304 it is (stat ``store/not_modified_unreferenced``).
* ``"none"``: such a page, a page the duplicate filter judged a copy (exact
  or near), and a 304 store nothing (stat ``store/duplicates_skipped``); the
  first copy is stored whole.
* ``"full"``: every body stored whole, no index; a 304 stores nothing.

Stats ``store/revisits/identical_payload_digest``,
``store/revisits/server_not_modified``; an index that cannot be reached
stores the page whole (``store/revisit_index_errors``, one WARNING a worker).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from redis.exceptions import RedisError

from crawlproject.recrawl.config import STATE_META_KEY
from crawlproject.recrawl.schedule import StateDecodeError, decode_state
from crawlproject.store.revisits import (
    DUPLICATES_FULL,
    DUPLICATES_NONE,
    IDENTICAL_PAYLOAD_DIGEST,
    SERVER_NOT_MODIFIED,
    Original,
    PayloadIndex,
)
from crawlproject.store.warc import Revisit

if TYPE_CHECKING:
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

NOT_MODIFIED = 304


@dataclass(frozen=True, slots=True)
class Choice:
    store: bool  # write a record (a response, or a revisit if ``revisit``)
    revisit: Revisit | None = None
    claimed: bool = False  # ours was indexed as the original: released if its write fails


STORE = Choice(True)
SKIP = Choice(False)


class RevisitChooser:
    def __init__(self, index: PayloadIndex | None, mode: str, stats: StatsCollector) -> None:
        self.index = index if mode != DUPLICATES_FULL else None
        self.mode = mode
        self.stats = stats
        self._warned = False

    async def choose(
        self, response: Response, sha1: bytes, fetched_at: datetime, copy: bool = False
    ) -> Choice:
        """``copy``: the duplicate filter judged the page a copy (exact or near)."""
        if response.status == NOT_MODIFIED:
            return await self._not_modified(response)
        if copy and self.mode == DUPLICATES_NONE:
            self.stats.inc_value("store/duplicates_skipped")
            return SKIP
        if self.index is None or not response.body or not 200 <= response.status < 300:
            return STORE  # identical error pages stay whole, as the duplicate filter leaves them
        try:
            original = await self.index.claim(sha1, response.url, fetched_at)
        except RedisError as exc:
            self._index_error(exc)
            return STORE
        if original is None:
            return Choice(True, claimed=True)
        if self.mode == DUPLICATES_NONE:
            self.stats.inc_value("store/duplicates_skipped")
            return SKIP
        self.stats.inc_value("store/revisits/identical_payload_digest")
        return Choice(True, _revisit(IDENTICAL_PAYLOAD_DIGEST, original, with_head=True))

    async def release(self, response: Response, sha1: bytes, fetched_at: datetime) -> None:
        """Our original's write failed: no revisit may refer to it."""
        if self.index is None:
            return
        try:
            await self.index.release(sha1, response.url, fetched_at)
        except RedisError as exc:
            self._index_error(exc)

    async def _not_modified(self, response: Response) -> Choice:
        if self.index is None or self.mode == DUPLICATES_NONE:
            self.stats.inc_value("store/duplicates_skipped")
            return SKIP
        prefix = _state_digest(response)
        original = None
        if prefix is not None:
            try:
                original = await self.index.find(prefix)
            except RedisError as exc:
                self._index_error(exc)
        if original is None:
            self.stats.inc_value("store/not_modified_unreferenced")
            return STORE
        self.stats.inc_value("store/revisits/server_not_modified")
        return Choice(True, _revisit(SERVER_NOT_MODIFIED, original, with_head=False))

    def _index_error(self, exc: Exception) -> None:
        self.stats.inc_value("store/revisit_index_errors")
        if not self._warned:
            self._warned = True
            logger.warning(
                "The index of stored payloads cannot be reached (%s): pages are stored "
                "whole meanwhile, and recrawls' 304s as they are",
                exc,
            )


def _revisit(profile: str, original: Original, with_head: bool) -> Revisit:
    return Revisit(profile, original.url, original.date, original.digest, with_head)


def _state_digest(response: Response) -> bytes | None:
    """The first 8 bytes of the SHA-1 of the URL's last 2xx body (its recrawl state)."""
    request = response.request
    text = request.meta.get(STATE_META_KEY) if request is not None else None
    if not isinstance(text, str):
        return None
    try:
        digest = decode_state(text).digest
    except StateDecodeError:
        return None  # counted by the recrawl middleware (recrawl/bad_state)
    return bytes.fromhex(digest) if digest else None
