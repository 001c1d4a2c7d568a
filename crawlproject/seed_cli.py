"""``crawlproject seed URL...``: one line per URL, what became of it.

* ``queued``: pushed on the crawl's ``<crawl>:start_urls`` list (one LPUSH
  for the batch); a worker takes it as a seed.
* ``already seen``: the crawl's seen set holds it (it was queued before,
  and fetched or still waiting), so a worker would skip it: not pushed. When
  it was fetched, if the crawl recorded that (the recrawl store's fetch
  state, kept for the URLs it tracks: ``CRAWL_RECRAWL_TRACK`` or a
  continuous crawl); else the line says the time is not known. With
  ``CRAWL_SEEN_FILTER=bloom`` "seen" may be a false positive (the filter's
  error rate).
* ``refused``: the crawler cannot fetch it as written, or the guard refuses
  it without a fetch (seed_check.py says why); not pushed.

Exit status 0 when every URL was queued or already seen, 1 when any was
refused (the others are queued all the same). Redis round trips per batch,
whatever its size: the shards' seen-set levels, then the seen tests and
fetch states, then the push.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy.settings import BaseSettings

from crawlproject.frontier.admission.seed_check import guard_problem, seed_problem
from crawlproject.frontier.basics.urls import UrlCanonicalizer, domain_key, host_key
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.seen_set import LAYOUT_FIELD, MIN_LEVEL, BloomShape, parse_layout
from crawlproject.guard.policy import GuardPolicy
from crawlproject.recrawl.schedule import StateDecodeError, decode_state

if TYPE_CHECKING:
    from redis.asyncio import Redis

QUEUED, SEEN, REFUSED = "queued", "already seen", "refused"


@dataclass(slots=True)
class Seed:
    url: str
    why: str | None = None  # refused: what is wrong
    pkey: str = ""
    shard: int = 0
    fingerprint: bytes = b""
    seen: bool = False
    fetched_s: int | None = None


def exact_place(fp: bytes, level: int, split: int) -> tuple[int, int]:
    """(bucket, member) of a fingerprint in an exact seen set of 2^level +
    split buckets, as _seen.lua places it."""
    x = int.from_bytes(fp[:6], "little")
    bucket = x % (1 << level)
    if bucket < split:
        bucket = x % (1 << (level + 1))
    return bucket, int.from_bytes(fp[:8], "little") >> MIN_LEVEL


def bloom_place(fp: bytes, shape: BloomShape) -> tuple[int, int, list[int]]:
    """(segment, byte offset of the block, bit positions in the block) of a
    fingerprint in a Bloom seen set, as _seen.lua places it."""
    block = int.from_bytes(fp[:5], "big") % shape.blocks
    segment = block // shape.per_segment
    at = (block - segment * shape.per_segment) * (shape.segment_bytes // shape.per_segment)
    bits = (shape.segment_bytes // shape.per_segment) * 8
    h = int.from_bytes(fp[5:8], "big")
    p, step = h % bits, 2 * ((h // bits) % (bits // 2)) + 1
    positions = []
    for _ in range(shape.k):
        positions.append(p)
        p = (p + step) % bits
    return segment, at, positions


def _all_set(block: bytes, positions: list[int]) -> bool:
    return all(p // 8 < len(block) and block[p // 8] >> (7 - p % 8) & 1 for p in positions)


def when_text(fetched_s: int | None) -> str:
    if fetched_s is None:
        return (
            "when is not known: this crawl records fetch times only for the URLs it "
            "tracks for recrawl (CRAWL_RECRAWL_TRACK)"
        )
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(fetched_s))
    return f"last fetched {stamp}"


def seed_line(seed: Seed) -> str:
    if seed.why is not None:
        return f"{REFUSED:<12}  {seed.url}: {seed.why}"
    if seed.seen:
        return f"{SEEN:<12}  {seed.url} ({when_text(seed.fetched_s)})"
    return f"{QUEUED:<12}  {seed.url}"


def judge(urls: Sequence[str], config: FrontierConfig, policy: GuardPolicy) -> list[Seed]:
    """Each URL as a seed: refused (and why), or placed (politeness key,
    shard, fingerprint) as a worker's admission places it."""
    canonicalizer = UrlCanonicalizer(config.session_params)
    pkey_of = host_key if config.politeness_key == "host" else domain_key
    seeds = []
    for url in urls:
        seed = Seed(url, seed_problem(url) or guard_problem(url, policy))
        if seed.why is None:
            canonical = canonicalizer.canonicalize(url)
            seed.pkey = pkey_of(canonical)
            seed.fingerprint = canonicalizer.fingerprint(canonical)
        seeds.append(seed)
    return seeds


async def look_up(redis: Redis, keys: CrawlKeys, seeds: list[Seed]) -> None:
    """Fills in ``seen`` and ``fetched_s`` of the seeds not refused."""
    todo = [s for s in seeds if s.why is None]
    if not todo:
        return
    for seed in todo:
        seed.shard = keys.shard_of(seed.pkey)
    shards = sorted({s.shard for s in todo})
    pipe = redis.pipeline(transaction=False)
    pipe.hget(keys.meta, LAYOUT_FIELD)
    for shard in shards:
        pipe.hmget(keys.shard_prefixes[shard] + "seen", "L", "s")
    layout, *levels = await pipe.execute()
    parsed = parse_layout(layout.decode(), keys.shards) if layout else None
    shape = parsed[1] if parsed is not None else None
    pairs = zip(shards, levels, strict=True)
    level_of = {shard: (int(L or MIN_LEVEL), int(s or 0)) for shard, (L, s) in pairs}
    pipe = redis.pipeline(transaction=False)
    bloom_bits: list[list[int]] = []
    for seed in todo:
        prefix = keys.shard_prefixes[seed.shard]
        if shape is not None:
            segment, at, positions = bloom_place(seed.fingerprint, shape)
            block_bytes = shape.segment_bytes // shape.per_segment
            pipe.getrange(f"{prefix}bloom:{segment}", at, at + block_bytes - 1)
            bloom_bits.append(positions)
        else:
            bucket, member = exact_place(seed.fingerprint, *level_of[seed.shard])
            pipe.sismember(f"{prefix}seen:{bucket}", str(member))
        pipe.hget(keys.fetch_states(seed.shard, seed.pkey), seed.fingerprint)
    replies = await pipe.execute()
    for i, seed in enumerate(todo):
        found, state = replies[2 * i], replies[2 * i + 1]
        seed.seen = _all_set(found, bloom_bits[i]) if shape is not None else bool(found)
        if seed.seen and state is not None:
            try:
                seed.fetched_s = decode_state(state).last_fetch_s
            except StateDecodeError:
                seed.fetched_s = None


async def seed_command(
    config: FrontierConfig,
    settings: BaseSettings,
    urls: Sequence[str],
    redis: Redis,
    keys: CrawlKeys,
) -> int:
    """Judges, looks up and pushes ``urls``; prints one line each; the exit status."""
    seeds = judge(urls, config, GuardPolicy.from_settings(settings))
    await look_up(redis, keys, seeds)
    queued = [s.url for s in seeds if s.why is None and not s.seen]
    if queued:
        # The workers take seeds from this list, oldest first (seeds.py).
        await redis.lpush(keys.start_urls, *queued)
    for seed in seeds:
        print(seed_line(seed))
    return 1 if any(s.why is not None for s in seeds) else 0


def seed_urls(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """The URLs given: arguments, then ``--file`` (one a line, ``#`` comments)."""
    urls = list(args.urls)
    if args.file:
        lines = args.file.read_text(encoding="utf-8").splitlines()
        urls += [u.strip() for u in lines if u.strip() and not u.startswith("#")]
    if not urls:
        parser.error("no URLs given")
    return urls


class SeedRun:
    """``crawlproject seed``'s run with the crawl's Redis; ``status`` is its
    exit status once it ran (1 until then: it did not)."""

    def __init__(self, config: FrontierConfig, settings: BaseSettings, urls: list[str]) -> None:
        self.config, self.settings, self.urls = config, settings, urls
        self.status = 1

    async def __call__(self, redis: Redis, keys: CrawlKeys) -> None:
        self.status = await seed_command(self.config, self.settings, self.urls, redis, keys)
