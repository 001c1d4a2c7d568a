"""The fleet's shared duplicate index: exact (body SHA-1) and near (SimHash) pages.

One atomic Lua script run per page (lua/dedupe.lua) tests the page against
every page any worker has stored before, and stores it when it is new, so of two
copies checked at the same moment exactly one is new. The keys are documented
in :mod:`crawlproject.frontier.keys` ("dedupe index", prefix ``cp:{C/dd}:``).

* Exact: the SHA-1 of the body, in packed 8-byte entries per 2-byte bucket
  (like the frontier's seen set).
* Near: the 64-bit SimHash within Hamming distance ``k``. The 64 bits are cut
  into k+1 blocks; a page within distance k shares at least one block with the
  query exactly (pigeonhole), so the script reads the k+1 strings the query's
  blocks select and compares each of their SimHashes on all 64 bits. Per
  lookup it scans about ``(k+1) * pages / 2**(64 / (k+1))`` entries: 610 at
  10M pages for k=3, but 29,000 for k=5, so k above 3 suits small indexes only.

The index's ``cfg`` fixes k and the SimHash features version at its first page;
a worker with another of either is refused (DedupeMismatch) on every page, and
by ``verify`` before its first: SimHashes of other features or of another block
layout would be misread, never silently.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, ResponseError

from crawlproject.dedupe.fingerprint import FEATURES_VERSION
from crawlproject.frontier.connection import evalsha_many
from crawlproject.frontier.keys import CrawlKeys
from crawlproject.recrawl.config import MAX_SIMHASH_K

# Pages judged within this window go to Redis in one round trip.
DEDUPE_BATCH_WINDOW_SECONDS = 0.02
DEDUPE_BATCH_MAX_PAGES = 64

DIGEST_BYTES = 20  # SHA-1
SIMHASH_BITS = 64
# CRAWL_SIMHASH_K's range (recrawl/config.py checks it too); the block width
# must stay >= 4 bits.
MAX_K = MAX_SIMHASH_K


class DedupeKind(enum.StrEnum):
    NEW = "new"
    EXACT = "exact"
    NEAR = "near"


_KINDS = (DedupeKind.NEW, DedupeKind.EXACT, DedupeKind.NEAR)  # the script's codes 0, 1, 2


@dataclass(frozen=True, slots=True)
class DedupeVerdict:
    kind: DedupeKind
    original: str | None  # URL of the earlier page it duplicates (when recorded), else None
    distance: int | None  # Hamming distance to it (0 for exact), None for NEW
    host_streak: int  # duplicates (exact or near) in a row from this host, this one included


class DedupeMismatch(ResponseError):
    """The crawl's index was built with another k or another SimHash features
    version (``FEATURES_VERSION``): its SimHashes cannot be compared with this
    worker's. A RedisError, so callers that keep a page when Redis fails keep
    it; the message (one line) names what differs."""


@dataclass(frozen=True, slots=True)
class Block:
    shift: int  # right shift that brings the block to the low bits
    bits: int

    def value(self, simhash: int) -> int:
        return (simhash >> self.shift) & ((1 << self.bits) - 1)


def block_layout(k: int) -> tuple[Block, ...]:
    """The k+1 blocks of a SimHash, most significant first, widths as even as possible
    (the wider ones first): k=3 -> 4 x 16 bits; k=5 -> 11, 11, 11, 11, 10, 10."""
    n = k + 1
    base, extra = divmod(SIMHASH_BITS, n)
    blocks, top = [], SIMHASH_BITS
    for i in range(n):
        bits = base + (1 if i < extra else 0)
        top -= bits
        blocks.append(Block(top, bits))
    return tuple(blocks)


def _scan_order(block: Block) -> str:
    """'b': compare an entry from its last byte, 'f': from its first, so that the
    bytes the block covers (equal in every entry of its string) come last."""
    centre = SIMHASH_BITS - block.shift - block.bits / 2  # bit index from the top
    return "b" if centre < SIMHASH_BITS / 2 else "f"


def _load_lua() -> str:
    return (resources.files("crawlproject.dedupe") / "lua" / "dedupe.lua").read_text()


class DedupeIndex:
    """The duplicate index of one crawl, seen from one worker."""

    def __init__(
        self,
        redis: Redis,
        keys: CrawlKeys,
        k: int = 3,
        record_originals: bool = True,
        features_version: int = FEATURES_VERSION,
    ) -> None:
        if not 0 <= k <= MAX_K:
            raise ValueError(f"k must be within 0..{MAX_K}, not {k}")
        if features_version < 1:
            raise ValueError(f"features_version must be >= 1, not {features_version}")
        self.redis = redis
        self.keys = keys
        self.k = k
        self.features_version = features_version
        self.record_originals = record_originals
        self.blocks = block_layout(k)
        self._order = "".join(_scan_order(b) for b in self.blocks)
        self._script = redis.register_script(_load_lua())

    def script_args(self, digest: bytes, simhash: int | None, url: str, host: str) -> list[Any]:
        """ARGV of one dedupe.lua run (KEYS[1] is ``keys.dedupe_config``)."""
        if len(digest) != DIGEST_BYTES:
            raise ValueError(f"digest must be a {DIGEST_BYTES}-byte SHA-1, not {len(digest)} bytes")
        args: list[Any] = [
            self.keys.dedupe_prefix,
            self.k,
            1 if self.record_originals else 0,
            host,
            url,
            digest[:10],
        ]
        if simhash is None:
            return [*args, b"", "", self.features_version]
        if not 0 <= simhash < 1 << SIMHASH_BITS:
            raise ValueError(f"simhash must be an unsigned {SIMHASH_BITS}-bit int")
        return [
            *args,
            simhash.to_bytes(8, "big"),
            self._order,
            self.features_version,
            *(self.keys.dedupe_near(i, b.value(simhash)) for i, b in enumerate(self.blocks)),
        ]

    async def verify(self) -> None:
        """Raises DedupeMismatch (one line, as dedupe.lua would) when the crawl's
        index was created with another k or SimHash features version; an index
        not yet created passes (its first page fixes both). Read-only: for a
        worker's start, so that a mismatch stops it before its first page."""
        have_k, have_fv = await self.redis.hmget(self.keys.dedupe_config, ["k", "fv"])
        if have_k is None:
            return
        k, fv = int(have_k), int(have_fv or 1)  # no field: an index of version 1
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

    async def check_and_add(
        self, digest: bytes, simhash: int | None, url: str, host: str
    ) -> DedupeVerdict:
        """The page's verdict; a new page is stored (see the module docstring).

        ``digest``: SHA-1 of the body (20 bytes); ``simhash``: unsigned 64-bit
        SimHash of its text, or None (exact test only); ``host``: its politeness
        key, whose streak of duplicates is counted.
        """
        args = self.script_args(digest, simhash, url, host)
        return (await self._evalsha([args]))[0]

    async def check_and_add_many(
        self, pages: Iterable[tuple[bytes, int | None, str, str]]
    ) -> list[DedupeVerdict]:
        """check_and_add for (digest, simhash, url, host) pages in one round trip:
        one atomic script run each, in order."""
        calls = [self.script_args(*page) for page in pages]
        return await self._evalsha(calls) if calls else []

    async def _evalsha(self, calls: Sequence[list[Any]]) -> list[DedupeVerdict]:
        """EVALSHA, and on NOSCRIPT (a restarted or flushed server) load the script
        and send again: on NOSCRIPT no run of the batch has happened."""
        sha, key = self._script.sha, self.keys.dedupe_config
        for attempt in (1, 2):
            try:
                if len(calls) == 1:
                    replies = [await self.redis.evalsha(sha, 1, key, *calls[0])]
                else:
                    replies = await evalsha_many(self.redis, [(sha, key, args) for args in calls])
            except NoScriptError:
                if attempt == 2:
                    raise
                await self.redis.script_load(self._script.script)
                continue
            except ResponseError as exc:
                if "dedupe index was created with" in str(exc):
                    raise DedupeMismatch(str(exc)) from exc
                raise
            return [_verdict(r) for r in replies]
        raise AssertionError("unreachable")


def _verdict(reply: list[Any]) -> DedupeVerdict:
    kind = _KINDS[int(reply[0])]
    original = reply[3] if len(reply) > 3 else None
    if isinstance(original, bytes):
        original = original.decode("utf-8", "replace")
    return DedupeVerdict(
        kind=kind,
        original=original,
        distance=None if kind is DedupeKind.NEW else int(reply[1]),
        host_streak=int(reply[2]),
    )


class DedupeBatcher:
    """Gathers the ``check_and_add`` calls made within ``window_seconds`` into
    one round trip (``check_and_add_many``): one script run per page as before,
    a fraction of the client-side cost per page. A worker judges pages as they
    come; the window only delays when a page's links leave, not any fetch."""

    def __init__(
        self,
        index: DedupeIndex,
        window_seconds: float = DEDUPE_BATCH_WINDOW_SECONDS,
        max_pages: int = DEDUPE_BATCH_MAX_PAGES,
    ) -> None:
        self.index = index
        self.window_seconds = window_seconds
        self.max_pages = max_pages
        self._pending: list[tuple[tuple[bytes, int | None, str, str], asyncio.Future[Any]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def check_and_add(
        self, digest: bytes, simhash: int | None, url: str, host: str
    ) -> DedupeVerdict:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[DedupeVerdict] = loop.create_future()
        self._pending.append(((digest, simhash, url, host), future))
        if len(self._pending) >= self.max_pages:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.window_seconds, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.ensure_future(self._send(batch))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(
        self, batch: list[tuple[tuple[bytes, int | None, str, str], asyncio.Future[Any]]]
    ) -> None:
        try:
            verdicts = await self.index.check_and_add_many(args for args, _ in batch)
        except Exception as exc:  # each caller gets the error (RedisError: page kept)
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), verdict in zip(batch, verdicts, strict=True):
            if not future.done():
                future.set_result(verdict)
