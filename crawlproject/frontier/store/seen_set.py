"""The crawl's seen set, Python side: its settings, its layout, its figures.

Every URL's 8-byte fingerprint is tested and added inside ``add.lua``, by
``crawlproject/frontier/store/lua/_seen.lua`` (the layout in its header and in
keys.py), one set per frontier shard. Two kinds (``CRAWL_SEEN_FILTER``):

* ``exact`` (default): linear hashing over Redis sets of integers (intsets);
  never loses a URL nor invents one (exact over the whole 64-bit fingerprint),
  grows by itself, and a link costs one SADD whatever the crawl's size;
* ``bloom``: a blocked Bloom filter of fixed size, for ``CRAWL_SEEN_CAPACITY``
  URLs at ``CRAWL_SEEN_ERROR_RATE``: about 1.8 bytes per URL instead of 9-10, but
  a URL it wrongly calls seen is never crawled. Its fill and the false-positive rate
  expected at that fill are stats (``SeenWatch``) and in ``crawlproject status``.

The kind and the Bloom filter's shape are fixed when the crawl is created
(``seen_layout`` in the crawl's ``meta``): a worker with other settings, or a
crawl made by a version with a fixed bucket count, is refused at start.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from redis.exceptions import RedisError
from scrapy.settings import BaseSettings

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import SEEN_MEMBER_SHIFT, FrontierMismatch
from crawlproject.frontier.store.script_replies import reply_text
from crawlproject.given import is_given
from crawlproject.lua import load_script
from crawlproject.setting_values import ConfigError, Setting, crawl_setting, read_config

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

SEEN_FILTERS = ("exact", "bloom")
# Exact: members per bucket (on average) past which a bucket splits. A bucket
# holds 64 to 256 (2 x SPLIT_LOAD at most on average, a few more by chance),
# so Redis keeps it as an intset of 8-byte integers up to its
# set-max-intset-entries (INTSET_ENTRIES_NEEDED); buckets start at 2^11 per
# shard (a member is the fingerprint without the 11 bits its bucket holds).
SPLIT_LOAD = 128
# Buckets a shard starts with: 2^MIN_LEVEL (_seen.lua's SEEN_MIN_LEVEL); a member
# is the fingerprint without those low bits (v >> MIN_LEVEL < 2^53, exact in Lua).
MIN_LEVEL = SEEN_MEMBER_SHIFT
INTSET_ENTRIES_NEEDED = 512  # Redis's default; a lower one turns buckets into hash tables
EXACT_LAYOUT = "exact3"  # exact3: buckets are sets of integers
# Exact layouts of older versions, refused: exact2 (buckets as packed strings in hashes).
OLD_EXACT_LAYOUTS = ("exact2",)
BLOOM_LAYOUT = "bloom2"  # bloom2: blocks of BLOCK_BYTES
OLD_LAYOUT_FIELD = "seen_bucket_bits"  # written by versions with fixed buckets
LAYOUT_FIELD = "seen_layout"
# A Bloom segment fits jemalloc's 2 MiB size class with Redis's string header;
# segments are sized to fill their size class (SDS_OVERHEAD: header + NUL, rounded up).
SDS_OVERHEAD = 16
MAX_SEGMENT_BYTES = 2**21 - SDS_OVERHEAD
# A URL's k bits all lie in one block of a segment (a blocked Bloom filter):
# one GETRANGE of 512 bytes per link instead of k reads across 2 MiB.
BLOCK_BYTES = 512
BLOCK_BITS = BLOCK_BYTES * 8
INIT_BATCH = 16  # segments created per seen_init call (32 MiB at most)
WATCH_SECONDS = 10.0
LN2 = math.log(2)


def size_class(n: int) -> int:
    """The allocation jemalloc (Redis's allocator) makes for ``n`` bytes: four
    size classes per doubling above 128 bytes, steps of 16 below."""
    if n <= 16:
        return 8 if n <= 8 else 16
    if n <= 128:
        return -(-n // 16) * 16
    step = 1 << ((n - 1).bit_length() - 3)
    return -(-n // step) * step


def blocked_fp_rate(keys_per_block: float, k: int) -> float:
    """False-positive rate of a blocked Bloom filter (Putze, Sanders and
    Singler 2007): a URL's k bits all lie in one block of BLOCK_BITS, which holds
    a Poisson number of URLs, λ on average."""
    lam = keys_per_block
    if lam <= 0:
        return 0.0
    q = 1 - 1 / BLOCK_BITS
    total, log_p = 0.0, -lam  # log Pois(j; λ), j = 0
    for j in range(int(lam + 12 * math.sqrt(lam) + 20)):
        if j:
            log_p += math.log(lam / j)
        total += math.exp(log_p) * (1 - q ** (k * j)) ** k
    return total


def best_k(keys_per_block: float) -> tuple[float, int]:
    """(false-positive rate, k) for the k that makes it least."""
    k0 = max(1, round(BLOCK_BITS / max(keys_per_block, 1e-9) * LN2))
    return min((blocked_fp_rate(keys_per_block, k), k) for k in range(max(1, k0 - 2), k0 + 3))


@dataclass(frozen=True, slots=True)
class BloomShape:
    """One shard's Bloom filter: ``segments`` strings of ``segment_bytes``, each
    ``per_segment`` blocks of BLOCK_BYTES; ``k`` bits per URL, all in one
    block; sized for ``per_shard`` URLs (the crawl's capacity over its shards)."""

    per_shard: int
    segments: int
    segment_bytes: int
    per_segment: int
    k: int

    @classmethod
    def of(cls, capacity: int, error_rate: float, shards: int) -> BloomShape:
        # The fewest blocks whose false-positive rate at capacity is at most
        # error_rate: a blocked filter needs ~1.5 % more bits than m = -n ln p
        # / ln^2 2 (14.4 bits per URL at 0.001) for the same rate. Then the
        # segment count that wastes least of the allocator's size classes,
        # each segment filling its class with whole blocks.
        per_shard = -(-capacity // shards)
        blocks = max(1, math.ceil(-per_shard * math.log(error_rate) / LN2**2 / BLOCK_BITS))
        while best_k(per_shard / blocks)[0] > error_rate:
            blocks += max(1, blocks // 200)
        need = blocks * BLOCK_BYTES

        def size(n: int) -> int:  # bytes of each of n segments, whole blocks
            fill = size_class(-(-need // n) + SDS_OVERHEAD) - SDS_OVERHEAD
            return fill // BLOCK_BYTES * BLOCK_BYTES

        first = -(-need // MAX_SEGMENT_BYTES)
        segments = min(
            (n for n in range(first, first + 64) if n * size(n) >= need),
            key=lambda n: n * size_class(size(n) + SDS_OVERHEAD),
        )
        per_segment = size(segments) // BLOCK_BYTES
        k = best_k(per_shard / (segments * per_segment))[1]
        return cls(per_shard, segments, per_segment * BLOCK_BYTES, per_segment, k)

    @property
    def blocks(self) -> int:
        return self.segments * self.per_segment

    def expected_fp_rate(self, n: int) -> float:
        """The chance that an unseen URL is called seen, with ``n`` URLs in the shard."""
        return blocked_fp_rate(n / self.blocks, self.k)


@dataclass(frozen=True, slots=True)
class SeenFilter:
    """CRAWL_SEEN_FILTER, CRAWL_SEEN_CAPACITY, CRAWL_SEEN_ERROR_RATE."""

    kind: str = "exact"  # CRAWL_SEEN_FILTER, lowercased
    capacity: Annotated[int, Setting("CRAWL_SEEN_CAPACITY")] = 0
    error_rate: Annotated[float, Setting("CRAWL_SEEN_ERROR_RATE")] = 0.001

    def __post_init__(self) -> None:
        if self.kind not in SEEN_FILTERS:
            raise ConfigError(f"CRAWL_SEEN_FILTER must be 'exact' or 'bloom', not {self.kind!r}")
        if self.kind == "bloom" and self.capacity <= 0:
            raise ConfigError(
                "CRAWL_SEEN_FILTER = 'bloom' needs CRAWL_SEEN_CAPACITY: the URLs the whole "
                "crawl will see (the filter's size is fixed when the crawl is created)"
            )
        if self.kind == "exact" and self.capacity:
            raise ConfigError(
                "CRAWL_SEEN_CAPACITY sizes a Bloom filter: set CRAWL_SEEN_FILTER = 'bloom' "
                "or leave it at 0 (the exact seen set grows by itself)"
            )
        if not 0 < self.error_rate < 0.5:
            raise ConfigError("CRAWL_SEEN_ERROR_RATE must be within (0, 0.5)")

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SeenFilter:
        if is_given(settings, "CRAWL_SEEN_BUCKET_BITS"):
            raise ConfigError(
                "CRAWL_SEEN_BUCKET_BITS is retired: the seen set now grows by itself "
                "(CRAWL_SEEN_FILTER); remove the setting"
            )
        kind = str(crawl_setting(settings, "CRAWL_SEEN_FILTER")).lower()
        return read_config(cls, settings, kind=kind)

    def bloom(self, shards: int) -> BloomShape:
        return BloomShape.of(self.capacity, self.error_rate, shards)

    def layout(self, shards: int) -> str:
        """The crawl's ``seen_layout`` (meta): equal for every worker of the crawl."""
        if self.kind == "exact":
            return EXACT_LAYOUT
        b = self.bloom(shards)
        return (
            f"{BLOOM_LAYOUT}:{self.capacity}:{self.error_rate!r}:"
            f"{b.segments}:{b.per_segment}:{BLOCK_BYTES}:{b.k}"
        )

    def script_arg(self, shards: int) -> str:
        """add.lua's seen argument (_seen.lua's seen_open)."""
        if self.kind == "exact":
            return f"i {SPLIT_LOAD}"
        b = self.bloom(shards)
        return f"b {b.segments} {b.per_segment} {BLOCK_BYTES} {b.k}"

    def describe(self) -> str:
        if self.kind == "exact":
            return "CRAWL_SEEN_FILTER = 'exact'"
        return (
            f"CRAWL_SEEN_FILTER = 'bloom' (CRAWL_SEEN_CAPACITY = {self.capacity}, "
            f"CRAWL_SEEN_ERROR_RATE = {self.error_rate})"
        )


def parse_layout(layout: str, shards: int) -> tuple[SeenFilter, BloomShape | None] | None:
    """The filter and Bloom shape a ``seen_layout`` records; None: unknown to this version."""
    kind, *fields = layout.split(":")
    if kind == EXACT_LAYOUT and not fields:
        return SeenFilter(), None
    if kind != BLOOM_LAYOUT or len(fields) != 6:
        return None
    try:
        capacity, segments, per_segment, block, k = (int(fields[i]) for i in (0, 2, 3, 4, 5))
        seen = SeenFilter("bloom", capacity, float(fields[1]))
    except (ValueError, ConfigError):
        return None
    if block != BLOCK_BYTES:
        return None
    return seen, BloomShape(-(-capacity // shards), segments, per_segment * block, per_segment, k)


def refuse_old_layout(crawl: str, meta: Mapping[bytes | str, bytes | str]) -> None:
    """A crawl created with the fixed-bucket seen set (no ``seen_layout``) is
    refused: its ``seen:<n>`` strings mean something else."""
    fields = {reply_text(k): reply_text(v) for k, v in meta.items()}
    if OLD_LAYOUT_FIELD in fields and LAYOUT_FIELD not in fields:
        bits = fields[OLD_LAYOUT_FIELD]
        raise FrontierMismatch(
            f"crawl {crawl!r} was created by an older version whose seen set has a fixed "
            f"number of buckets ({OLD_LAYOUT_FIELD}={bits}); this version cannot read it. "
            "Finish the crawl with the version that created it, or start it again under "
            "another CRAWL_NAME."
        )


async def prepare_seen(redis: Redis, keys: CrawlKeys, seen: SeenFilter) -> None:
    """Records the crawl's seen layout, or refuses ours if it differs; creates
    the Bloom segments of a Bloom crawl."""
    ours = seen.layout(keys.shards)
    if seen.kind == "exact":
        await check_intset_limit(redis)  # before anything is written
    await redis.hsetnx(keys.meta, LAYOUT_FIELD, ours)
    have = reply_text(await redis.hget(keys.meta, LAYOUT_FIELD) or b"")
    if have in OLD_EXACT_LAYOUTS:
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} was created by an older version whose exact seen set "
            f"has the layout {have!r} (this version's: {ours!r}); this version cannot read "
            "it. Finish the crawl with the version that created it, or start it again "
            "under another CRAWL_NAME."
        )
    if have != ours:
        theirs = parse_layout(have, keys.shards)
        what = theirs[0].describe() if theirs else f"the layout {have!r}, unknown to this version"
        if what == seen.describe():  # the same settings, sized by another version
            what = f"the layout {have!r} (this version's: {ours!r})"
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} keeps its seen set with {what}; this worker has "
            f"{seen.describe()}. Use the crawl's settings, or another crawl name."
        )
    if seen.kind == "bloom":
        b = seen.bloom(keys.shards)
        init = redis.register_script(load_script("crawlproject.frontier.store", "seen_init"))
        for shard in range(keys.shards):
            for first in range(0, b.segments, INIT_BATCH):
                count = min(INIT_BATCH, b.segments - first)
                args: list[str | int] = [keys.shard_prefixes[shard], first, count, b.segment_bytes]
                await init(keys=keys.script_keys(shard), args=args)


async def check_intset_limit(redis: Redis) -> None:
    """Refuses a Redis whose set-max-intset-entries is below what the exact
    set's buckets need: they would be kept as hash tables, several times the
    memory per URL, silently. A Redis that does not answer CONFIG GET (a
    managed one may not) is taken at Redis's default, with a log line."""
    try:
        reply = await redis.config_get("set-max-intset-entries")
    except RedisError as exc:
        logger.info(
            "Could not read Redis's set-max-intset-entries (%s): the exact seen set needs "
            "at least %d (Redis's default)",
            exc,
            INTSET_ENTRIES_NEEDED,
        )
        return
    fields: dict[str, Any] = {}
    if isinstance(reply, dict):
        fields = {reply_text(k): v for k, v in reply.items() if k is not None}
    value = fields.get("set-max-intset-entries")
    if not isinstance(value, bytes | str):
        return
    have = int(reply_text(value))
    if have < INTSET_ENTRIES_NEEDED:
        raise FrontierMismatch(
            f"Redis's set-max-intset-entries is {have}: the exact seen set needs at least "
            f"{INTSET_ENTRIES_NEEDED} (its buckets of up to ~300 URLs would be kept as hash "
            "tables, several times the memory); raise it, or set CRAWL_SEEN_FILTER = 'bloom'"
        )


@dataclass(frozen=True, slots=True)
class SeenFigures:
    """The seen set of a crawl, summed over its shards."""

    filter: str
    urls: int
    capacity: int | None = None
    capacity_used: float | None = None  # URLs / capacity (Bloom)
    expected_fp_rate: float | None = None  # at the current fill (Bloom)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"filter": self.filter, "urls": self.urls}
        if self.capacity is not None:
            out["capacity"] = self.capacity
            out["capacity_used"] = round(self.capacity_used or 0.0, 4)
            out["expected_fp_rate"] = float(f"{self.expected_fp_rate or 0.0:.3g}")
        return out


async def seen_figures(redis: Redis, keys: CrawlKeys) -> SeenFigures:
    """One read: the layout and each shard's count (``seen`` n)."""
    pipe = redis.pipeline(transaction=False)
    pipe.hget(keys.meta, LAYOUT_FIELD)
    for shard in range(keys.shards):
        pipe.hget(keys.seen_state(shard), "n")
    layout, *counts = await pipe.execute()
    per_shard = [int(c or 0) for c in counts]
    urls = sum(per_shard)
    parsed = parse_layout(reply_text(layout or b""), keys.shards)
    if parsed is None:
        return SeenFigures("unknown" if layout else "none", urls)
    seen, shape = parsed
    if shape is None:
        return SeenFigures(seen.kind, urls)
    # A probe lands in a shard as the URLs do (by host): weight each shard by its fill.
    fp = sum(n * shape.expected_fp_rate(n) for n in per_shard) / urls if urls else 0.0
    return SeenFigures(seen.kind, urls, seen.capacity, urls / seen.capacity, fp)


class SeenWatch:
    """A worker's view of the crawl's seen set: stats ``frontier/seen_urls``
    and, for a Bloom filter, ``frontier/seen_capacity_used`` (URLs / capacity)
    and ``frontier/seen_fp_rate_expected``; one WARNING once the filter holds
    more URLs than its capacity (its false-positive rate then climbs fast)."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self._next = 0.0
        self._warned = False

    async def check(self, redis: Redis, keys: CrawlKeys, force: bool = False) -> None:
        """Every WATCH_SECONDS at most (callers may call it more often), or now if ``force``."""
        now = time.monotonic()
        if now < self._next and not force:
            return
        self._next = now + WATCH_SECONDS
        f = await seen_figures(redis, keys)
        self.stats.set_value("frontier/seen_urls", f.urls)
        if f.capacity_used is None:
            return
        self.stats.set_value("frontier/seen_capacity_used", round(f.capacity_used, 4))
        self.stats.set_value("frontier/seen_fp_rate_expected", f.expected_fp_rate)
        if f.capacity_used > 1 and not self._warned:
            self._warned = True
            logger.warning(
                "The Bloom seen set of crawl %r holds %d URLs, past its CRAWL_SEEN_CAPACITY "
                "of %d: new URLs it wrongly calls seen (expected rate now %.3g) are lost "
                "to the crawl",
                keys.crawl,
                f.urls,
                f.capacity,
                f.expected_fp_rate,
            )
