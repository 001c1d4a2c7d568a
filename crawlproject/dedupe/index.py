"""The fleet's shared duplicate index: exact (body SHA-1) and near (SimHash) pages.

The index is spread over hash tags (crawlproject/dedupe/spread.py,
spread_index.py; ``parts`` in its ``cfg``): a page's check is a few single-slot
calls on their masters; of two copies of a body checked at once exactly one is
new, of two near copies at least one. A worker uses the crawl's layout, never
its own: ``parts`` (CRAWL_DEDUPE_PARTS) only chooses a new index's. An index
made on one hash tag before issue 42 (``cp:{C/dd}:``, a ``cfg`` with ``b`` and
no ``parts``) is refused in one line (:data:`ONE_TAG`) naming ``crawlproject
dedupe migrate``, which makes it spread (crawlproject/dedupe/migrate.py). The
keys are documented in :mod:`crawlproject.frontier.store.dedupe_keys`.

* Exact: the SHA-1 of the body (its first 80 bits), in packed 8-byte entries
  per bucket.
* Near: the 64-bit SimHash within Hamming distance ``k`` (Manku, Jain and Das
  Sarma 2007). The 64 bits are cut into ``b`` blocks; a page within distance k
  differs from the query in at most k of them, so it shares b - k blocks with it
  exactly (pigeonhole). Each of the C(b, k) tables is keyed by one choice of
  b - k blocks: the script reads, per table, the bucket the query's key selects,
  and compares its SimHashes on all 64 bits.

Both grow by linear hashing (each part's buckets split as it fills,
lua/spread_split.lua), so a lookup reads about ``load`` entries per table whatever the index's size,
until a table's buckets are as many as its key has values. ``b`` is k + 2 for
k <= 5 (k = 3: 10 tables keyed by 25 or 26 bits, flat to about 2**25 x load
pages, 8 bytes per table per page), else k + 1 (k + 1 tables of one block of
64 / (k+1) bits: for small indexes only). An index from before these layouts
(no ``b`` in its ``cfg``: fixed buckets, never split) is refused, as one of
other features is (:data:`FIXED_BUCKETS`).

The index's ``cfg`` fixes k and the SimHash features version at its first page;
a worker with another of either is refused (DedupeMismatch) on every page, and
by ``verify`` before its first: SimHashes of other features or of another block
layout would be misread, never silently. Its layout (b, load, first level) is
fixed then too, and a worker uses the index's.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from crawlproject.dedupe.calls import load_script
from crawlproject.dedupe.figures import index_figures as index_figures  # status/view.py's
from crawlproject.dedupe.fingerprint import FEATURES_VERSION
from crawlproject.dedupe.layout import (
    DEDUPE_LOAD,
    NEAR_MIN_LEVEL,
    SIMHASH_BITS,
    default_blocks,
    layout_problem,
    near_tables,
)
from crawlproject.dedupe.spread import DEDUPE_PARTS, Spread, parts_problem
from crawlproject.dedupe.spread_index import SpreadIndex
from crawlproject.dedupe.spread_pages import SAME_URL, UNRECORDED, Page
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.recrawl.config import MAX_SIMHASH_K
from crawlproject.redis_calls import OUTAGE_ERRORS, as_redis_error

DIGEST_BYTES = 20  # SHA-1
# CRAWL_SIMHASH_K's range (recrawl/config.py checks it too); the block width
# must stay >= 4 bits.
MAX_K = MAX_SIMHASH_K


class DedupeKind(enum.StrEnum):
    NEW = "new"
    EXACT = "exact"
    NEAR = "near"


_KINDS = (DedupeKind.NEW, DedupeKind.EXACT, DedupeKind.NEAR)  # the scripts' codes 0, 1, 2
# Code 3 (SAME_URL): a match whose original is the page's own URL (DedupeVerdict.same_url).


@dataclass(frozen=True, slots=True)
class DedupeVerdict:
    kind: DedupeKind
    original: str | None  # URL of the earlier page it duplicates (when recorded), else None
    distance: int | None  # Hamming distance to it (0 for exact), None for NEW
    host_streak: int  # duplicates (exact or near) in a row from this host, this one included
    # NEW because its match was its own URL's earlier fetch (a recrawl, or a
    # worker that died after judging it): counted nowhere, its host's streak
    # left as it was, nothing stored. Known only with originals recorded.
    same_url: bool = False
    # NEW because its body was stored with no URL recorded (spread_pages.UNRECORDED):
    # kept, so a page whose judging worker died is never lost with its links.
    unrecorded: bool = False


def _same_url(url: str) -> DedupeVerdict:
    return DedupeVerdict(DedupeKind.NEW, url, None, 0, same_url=True)


logger = logging.getLogger(__name__)


class DedupeMismatch(ResponseError):
    """The crawl's index was built with another k or another SimHash features
    version (``FEATURES_VERSION``): its SimHashes cannot be compared with this
    worker's; or it is in a layout this release does not read. A RedisError,
    so callers that keep a page when Redis fails keep it; the message (one
    line) names what differs."""


# The one line a worker stops with on an index from before the growing layout
# (a release before 2026-11-27, dcf59d4), whose fixed buckets it no longer reads.
FIXED_BUCKETS = (
    "dedupe index of crawl {crawl} was created with fixed buckets (no 'b' in its cfg) by a "
    "release before the growing layout, which this release no longer reads: finish the "
    "crawl with the release that started it, or start it over (crawlproject reset --crawl "
    "{crawl}) or under another CRAWL_NAME"
)
# The one line a worker stops with on an index of the one-tag layout (removed in
# issue 42): crawlproject/dedupe/migrate.py makes it spread.
ONE_TAG = (
    "dedupe index of crawl {crawl} is in the one-tag layout (a cfg without 'parts', made "
    "before issue 42 or with CRAWL_DEDUPE_PARTS=0), which this release no longer reads: "
    "stop the crawl's workers and run crawlproject dedupe migrate --crawl {crawl}"
)


class DedupeIndex:
    """The duplicate index of one crawl, seen from one worker."""

    def __init__(
        self,
        redis: Redis,
        keys: CrawlKeys,
        k: int = 3,
        record_originals: bool = True,
        features_version: int = FEATURES_VERSION,
        load: int = DEDUPE_LOAD,
        near_min_level: int = NEAR_MIN_LEVEL,
        blocks: int = 0,
        parts: int = DEDUPE_PARTS,
    ) -> None:
        if not 0 <= k <= MAX_K:
            raise ValueError(f"k must be within 0..{MAX_K}, not {k}")
        if features_version < 1:
            raise ValueError(f"features_version must be >= 1, not {features_version}")
        if load < 1 or not 0 <= near_min_level <= 40:
            raise ValueError("load must be >= 1 and near_min_level within 0..40")
        if blocks and (problem := layout_problem(k, blocks)):
            raise ValueError(f"blocks={blocks}: {problem}")
        if problem := parts_problem(parts):
            raise ValueError(f"parts={parts}: {problem}")
        self.redis = redis
        self.keys = keys
        self.k = k
        self.features_version = features_version
        self.record_originals = record_originals
        self.load = load
        self.near_min_level = near_min_level
        self.parts = parts  # a new index's (an existing one keeps its own)
        self._use_layout(blocks or default_blocks(k))
        self._open_script = load_script(redis, "spread_open")
        self.spread: SpreadIndex | None = None  # the index's layout is spread
        self._opened = False  # the index's cfg read (its layout known)

    def _use_layout(self, blocks: int) -> None:
        if problem := layout_problem(self.k, blocks):
            raise DedupeMismatch(f"dedupe index layout of {blocks} blocks: {problem}")
        self.n_blocks = blocks
        self.tables = near_tables(self.k, blocks)

    async def verify(self) -> None:
        """Raises DedupeMismatch (one line) when the crawl's index is of a layout
        this release does not read (fixed buckets, one tag) or was created with
        another k or SimHash features version; an index not yet created passes
        (its first page fixes both). Takes the index's layout. Read-only: for
        a worker's start, so that a mismatch stops it before its first page."""
        fields = ["k", "fv", "b", "load", "nmin", "parts"]
        cfg = await self.redis.hmget(self.keys.dedupe_config, fields)
        if cfg[0] is not None:
            self._take(cfg)

    def _take(self, cfg: Sequence[bytes | str | None]) -> None:
        """Checks the index's cfg (k, fv, b, load, nmin, parts) against this
        worker and uses its layout."""
        k, fv = int(cfg[0] or 0), int(cfg[1] or 1)  # no fv: an index of version 1
        if k != self.k:
            raise DedupeMismatch(
                f"dedupe index was created with k={k}, this worker has k={self.k} (CRAWL_SIMHASH_K)"
            )
        if fv != self.features_version:
            raise DedupeMismatch(
                f"dedupe index was created with SimHash features version {fv}, this worker "
                f"has version {self.features_version} (crawlproject/dedupe/fingerprint.py "
                "FEATURES_VERSION): finish the crawl with the release that started it, "
                "or start a new crawl"
            )
        if cfg[2] is None:  # no b: fixed buckets
            raise DedupeMismatch(FIXED_BUCKETS.format(crawl=self.keys.crawl))
        if cfg[5] is None:
            raise DedupeMismatch(ONE_TAG.format(crawl=self.keys.crawl))
        self._adopt(int(cfg[2]))
        self._opened = True
        layout = Spread(self.keys.crawl, k, self.n_blocks, int(cfg[5]), int(cfg[3] or 0),
                        int(cfg[4] or 0))  # fmt: skip
        if self.spread is None or self.spread.spread != layout:
            if layout.parts != self.parts:  # CRAWL_DEDUPE_PARTS: the index's wins
                logger.info("Duplicate index: using the crawl's %d parts", layout.parts)
            self.spread = SpreadIndex(self.redis, layout, fv, self.record_originals)

    async def _open(self) -> None:
        """Before the first page: a new index is made (its cfg, by one atomic
        script: of workers starting together one makes it); an existing one is
        used as it is."""
        cfg = await self._open_script(
            keys=[self.keys.dedupe_config],
            args=[self.k, self.features_version, self.n_blocks, self.load,
                  self.near_min_level, self.parts],
        )  # fmt: skip
        self._take(cfg)

    def _adopt(self, blocks: int) -> None:
        """Uses the index's near layout: its ``b``."""
        if blocks != self.n_blocks:
            logger.info(
                "Duplicate index: using the crawl's layout of %d blocks (%d near tables)",
                blocks,
                len(near_tables(self.k, blocks)),
            )
            self._use_layout(blocks)

    async def check_and_add(
        self, digest: bytes, simhash: int | None, url: str, host: str
    ) -> DedupeVerdict:
        """The page's verdict; a new page is stored (see the module docstring).

        ``digest``: SHA-1 of the body (20 bytes); ``simhash``: unsigned 64-bit
        SimHash of its text, or None (exact test only); ``host``: its politeness
        key, whose streak of duplicates is counted.
        """
        return (await self.check_and_add_many([(digest, simhash, url, host)]))[0]

    async def check_and_add_many(
        self, pages: Iterable[tuple[bytes, int | None, str, str]]
    ) -> list[DedupeVerdict]:
        """check_and_add for (digest, simhash, url, host) pages, judged in order
        in a few round trips (spread_index.py)."""
        pages = list(pages)
        if not pages:
            return []
        for digest, simhash, _, _ in pages:
            _check_page(digest, simhash)
        try:
            return await self._check_many(pages)
        except OUTAGE_ERRORS as exc:
            # Whatever Redis did, the caller sees a RedisError (and keeps the page).
            if isinstance(exc, RedisError):
                raise
            raise as_redis_error(exc) from exc

    async def _check_many(
        self, pages: list[tuple[bytes, int | None, str, str]]
    ) -> list[DedupeVerdict]:
        if not self._opened:
            await self._open()
        assert self.spread is not None  # _open took the index's layout, or refused it
        try:
            return [_spread_verdict(p) for p in await self.spread.check_many(pages)]
        except ResponseError as exc:
            # A part made by a worker of another layout (the crawl's index reset
            # and made again meanwhile): nothing written.
            if "dedupe index layout: part" in str(exc):
                raise DedupeMismatch(str(exc)) from exc
            raise

    def take_store_failures(self) -> Counter[str]:
        """Stores that failed after their pages were judged, since last asked."""
        return self.spread.take_failures() if self.spread is not None else Counter()


def _check_page(digest: bytes, simhash: int | None) -> None:
    if len(digest) != DIGEST_BYTES:
        raise ValueError(f"digest must be a {DIGEST_BYTES}-byte SHA-1, not {len(digest)} bytes")
    if simhash is not None and not 0 <= simhash < 1 << SIMHASH_BITS:
        raise ValueError(f"simhash must be an unsigned {SIMHASH_BITS}-bit int")


def _spread_verdict(page: Page) -> DedupeVerdict:
    if page.kind == SAME_URL:
        return _same_url(page.url)
    if page.kind == UNRECORDED:
        return DedupeVerdict(DedupeKind.NEW, None, None, 0, unrecorded=True)
    kind = _KINDS[page.kind]
    distance = None if kind is DedupeKind.NEW else (0 if kind is DedupeKind.EXACT else page.near)
    return DedupeVerdict(kind, page.original, distance, page.streak)
