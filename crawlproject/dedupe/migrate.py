"""``crawlproject dedupe migrate --crawl NAME``: a one-tag duplicate index made
spread, the one layout this release reads (issue 42).

Reads the crawl's one-tag index (crawlproject/dedupe/one_tag_read.py: every
stored page's SHA-1 bytes 1-10, every stored SimHash, the originals' URLs,
the hosts' streaks and the counters) and writes every stored page into a new
spread index of ``CRAWL_DEDUPE_PARTS`` parts (its k, features version, blocks,
load and first near level the old index's) through the spread index's own
path, SpreadIndex.check_many, in batches: the result is what a crawl that
had checked those pages would have written. Then it copies the streaks and
the counters, marks ``cfg`` spread (``parts``; written last, the marker) and
removes the old keys. Nothing is lost: both layouts keep a page's SHA-1 and
its SimHash apart, never as a pair. A page stored without a SimHash keeps its
original URL under its SHA-1, so such pages go in without a SimHash; the
SimHashes are paired with the other stored SHA-1s (which with which does not
matter to either layout).

A re-run after a crash midway: before the marker, the index is still
one-tag (workers refuse it) and the old keys are whole; the spread keys a
crashed run left are deleted and the copy starts over. After the marker, the
index is spread: the one-tag keys left are removed (``already spread`` when
there are none). Refused in one line: no index, an index already spread, one
of the fixed buckets (no ``b``: finish or reset), or workers of the crawl alive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from crawlproject.dedupe.one_tag_read import (
    GROWTH_FIELDS,
    OneTagIndex,
    is_one_tag,
    one_tag_keys,
    read_one_tag,
)
from crawlproject.dedupe.spread import Spread
from crawlproject.dedupe.spread_index import SpreadIndex
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.script_replies import reply_text

BATCH = 64  # pages a check_many, as a worker's batches
MIGRATE_HOST = ""  # the tally's host (its streak is never kept: every page is new)
UNLINK_BATCH = 500


class MigrateRefused(Exception):
    """One line for stderr: why nothing was migrated."""


@dataclass(frozen=True)
class Migrated:
    pages: int
    simhashes: int
    originals: int
    exact: int  # the counters copied
    near: int
    removed: int  # one-tag keys removed
    parts: int

    def line(self, crawl: str) -> str:
        return (
            f"crawl {crawl!r}: dedupe index migrated to the spread layout ({self.parts} parts): "
            f"{self.pages} pages ({self.simhashes} with a SimHash, {self.originals} original "
            f"URLs), {self.exact} exact and {self.near} near duplicates counted; "
            f"{self.removed} one-tag keys removed"
        )


async def _unlink(redis: Redis, names: Sequence[bytes | str]) -> int:
    removed = 0
    for at in range(0, len(names), UNLINK_BATCH):
        removed += int(await redis.unlink(*names[at : at + UNLINK_BATCH]))
    return removed


async def _spread_keys(redis: Redis, keys: CrawlKeys) -> list[bytes | str]:
    """The crawl's spread parts' keys (``cp:{C/dd/...}:``)."""
    return [key async for key in redis.scan_iter(match=f"cp:{{{keys.crawl}/dd/*", count=1000)]


async def migrate(redis: Redis, keys: CrawlKeys, parts: int) -> str:
    """Migrates crawl ``keys.crawl``'s index (see the module docstring); its one line."""
    crawl = keys.crawl
    cfg = {
        reply_text(f): reply_text(v) for f, v in (await redis.hgetall(keys.dedupe_config)).items()
    }
    if "parts" in cfg:
        removed = await _unlink(redis, await one_tag_keys(redis, keys))
        await redis.hdel(keys.dedupe_config, *GROWTH_FIELDS)
        if removed:
            return (
                f"crawl {crawl!r}: dedupe index already spread; removed {removed} one-tag keys "
                "an interrupted migrate left"
            )
        raise MigrateRefused(f"crawl {crawl!r}: dedupe index already spread: nothing to migrate")
    if "k" not in cfg:
        raise MigrateRefused(
            f"crawl {crawl!r} has no dedupe index in this Redis: nothing to migrate"
        )
    if not is_one_tag(cfg):
        raise MigrateRefused(
            f"crawl {crawl!r}: dedupe index of fixed buckets (no 'b' in its cfg), from a release "
            "before the growing layout: it cannot be migrated; finish the crawl with that "
            f"release, or start it over (crawlproject reset --crawl {crawl})"
        )
    try:
        spread = Spread(
            crawl, int(cfg["k"]), int(cfg["b"]), parts, int(cfg["load"]), int(cfg["nmin"])
        )
    except ValueError as exc:  # too many parts for the index's blocks
        raise MigrateRefused(f"crawl {crawl!r}: CRAWL_DEDUPE_PARTS={parts}: {exc}") from exc
    await _unlink(redis, await _spread_keys(redis, keys))  # a crashed run's copy
    old = await read_one_tag(redis, keys)
    fv = int(cfg.get("fv", "1"))
    await _copy_pages(redis, spread, fv, old)
    await _copy_hosts(redis, spread, old)
    # The marker, last: from here workers use the spread index.
    await redis.hset(keys.dedupe_config, "parts", str(parts))
    await redis.hdel(keys.dedupe_config, *GROWTH_FIELDS)
    removed = await _unlink(redis, await one_tag_keys(redis, keys))
    return Migrated(
        len(old.digests), len(old.simhashes), len(old.originals),
        old.counters.get("exact", 0), old.counters.get("near", 0), removed, parts,
    ).line(crawl)  # fmt: skip


def _pages(old: OneTagIndex) -> list[tuple[bytes, int | None, str | None]]:
    """(SHA-1, SimHash, original URL) of every stored page: a SHA-1 whose
    bytes 1-8 name an original was stored without a SimHash; the SimHashes go
    with the other SHA-1s, in order."""
    pages: list[tuple[bytes, int | None, str | None]] = []
    with_sim = []
    for digest in old.digests:
        url = old.originals.get(digest[:8])
        if url is not None:
            pages.append((digest, None, url))
        else:
            with_sim.append(digest)
    sims: list[int | None] = list(old.simhashes)
    if len(sims) > len(with_sim):  # not from dedupe.lua (it stores a page's both or none)
        raise MigrateRefused(f"dedupe index holds {len(sims)} SimHashes, {len(with_sim)} SHA-1s")
    sims += [None] * (len(with_sim) - len(sims))
    for digest, sim in zip(with_sim, sims, strict=True):
        url = old.originals.get(sim.to_bytes(8, "big")) if sim is not None else None
        pages.append((digest, sim, url))
    return pages


async def _copy_pages(redis: Redis, spread: Spread, fv: int, old: OneTagIndex) -> None:
    """Every page through SpreadIndex.check_many: those with an original URL
    recorded, the others (no URL: none recorded) not."""
    pages = _pages(old)
    for record in (True, False):
        index = SpreadIndex(redis, spread, fv, record)
        batch = [
            (digest.ljust(20, b"\0"), sim, url or "", MIGRATE_HOST)  # a SHA-1's bytes 1-10 are kept
            for digest, sim, url in pages
            if (url is not None) == record
        ]
        for at in range(0, len(batch), BATCH):
            judged = await index.check_many(batch[at : at + BATCH])
            if failed := index.take_failures():
                raise MigrateRefused(f"not migrated: writes failed ({dict(failed)}); run it again")
            if not_new := [page.url for page in judged if page.kind != 0]:
                raise MigrateRefused(
                    f"not migrated: {len(not_new)} stored pages judged copies of others "
                    f"(e.g. {not_new[0]!r}): the one-tag index is not as dedupe.lua wrote it"
                )


async def _copy_hosts(redis: Redis, spread: Spread, old: OneTagIndex) -> None:
    """The streaks into their host parts; the counters (the migration's
    tallies replaced) into part 0 (``crawlproject status`` sums the parts)."""
    await _unlink(redis, [spread.counters_key(p) for p in range(spread.parts)])
    if old.counters:
        await redis.hset(spread.counters_key(0), mapping=old.counters)  # type: ignore[arg-type]
    for host, streak in old.streaks.items():
        await redis.hset(spread.streak_key(spread.host_part(host)), host, streak)
