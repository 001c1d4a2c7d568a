"""The frontier's shard tags placed one per equal run of Redis Cluster's slots
(crawlproject/frontier/store/hash_slots.py; meta ``shard_tags`` = ``even``), and an older
crawl (meta with ``shards``, no ``shard_tags``) read and crawled on its plain
tags ``C/s``."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.crc import key_slot
from scrapy.settings import Settings

from crawlproject.dedupe.spread import part_tags
from crawlproject.frontier.basics.urls import UrlCanonicalizer
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.crawl.persist import delete_crawl
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS, QUEUE_LAYOUT
from crawlproject.frontier.store.hash_slots import (
    EVEN,
    HASH_SLOTS,
    PLAIN,
    RUN_HEAD,
    shard_tags,
    tag_in_run,
)
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import FrontierMismatch
from crawlproject.frontier.store.redis_frontier import NewEntry, RedisFrontier
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.entries import entry as make_entry
from testkit.redis_cluster import RedisCluster
from testkit.testweb import TestWeb, page_counts

CANON = UrlCanonicalizer(["sid"])
FAST = {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}


def entry(url: str, dont_filter: bool = False) -> NewEntry:
    return make_entry(url, dont_filter=dont_filter, canon=CANON)  # with its sid rule


def config(redis_url: str) -> FrontierConfig:
    return FrontierConfig.from_settings(Settings({"REDIS_URL": redis_url}))


def tag_of(prefix: str | bytes) -> str:
    text = prefix.decode() if isinstance(prefix, bytes) else prefix
    return text.split("{", 1)[1].split("}", 1)[0]


# -- where the tags sit (pure) ---------------------------------------------------------


@pytest.mark.parametrize("shards", [1, 4, 32, 64])
def test_a_crawls_shard_tags_sit_one_per_run(shards: int) -> None:
    """Tag s lands in the s-th of ``shards`` equal runs of the 16,384 slots, in
    its first RUN_HEAD slots (by redis-py's own CRC16), with the first suffix
    that does: none, or ``~n``."""
    for crawl in ("web", "bench", "a-very_long.crawl-name", "x"):
        keys = CrawlKeys(crawl, shards)
        assert keys.tags == EVEN
        assert len(set(keys.shard_prefixes)) == shards
        for s, prefix in enumerate(keys.shard_prefixes):
            lo = s * HASH_SLOTS // shards
            hi = min((s + 1) * HASH_SLOTS // shards, lo + RUN_HEAD)
            assert lo <= key_slot(keys.ready(s).encode()) < hi, (crawl, s, prefix)
            match = re.fullmatch(rf"{re.escape(crawl)}/{s}(?:~(\d+))?", tag_of(prefix))
            assert match, prefix
            n = int(match.group(1) or 0)
            assert match.group(1) is None or n >= 1
            # The tags it passed over (none when the bare one lands in its run).
            tries = [f"{crawl}/{s}", *(f"{crawl}/{s}~{m}" for m in range(1, n))] if n else []
            assert not any(lo <= key_slot(t.encode()) < hi for t in tries), (crawl, s)
        plain = CrawlKeys(crawl, shards, tags=PLAIN).shard_prefixes
        assert plain == [f"cp:{{{crawl}/{s}}}:" for s in range(shards)]


def test_the_search_is_shared_and_bounded() -> None:
    # The duplicate index's parts take the same search (their tags unchanged).
    families = ("n0", "x", "o", "h")
    tags = part_tags("web", families, 4)
    assert tags == tuple(
        tag_in_run(f"web/dd/{f}.{p}", p * 4 + i, 16)
        for p in range(4)
        for i, f in enumerate(families)
    )
    with pytest.raises(ValueError, match="16384"):
        tag_in_run("web/0", 0, HASH_SLOTS + 1)
    with pytest.raises(ValueError, match="shard tags 'odd'"):
        shard_tags("web", 4, "odd")
    with pytest.raises(ConfigError, match=r"within 1\.\.16384"):
        FrontierConfig.from_settings(Settings({"CRAWL_FRONTIER_SHARDS": HASH_SLOTS + 1}))


# -- a new crawl, an older one (real redis-server) -------------------------------------


async def test_a_new_crawl_records_even_tags_and_its_keys_carry_them(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    try:
        keys = await config(redis_url).open_keys(redis, "fresh")
        assert keys.tags == EVEN and keys.shards == NEW_CRAWL_SHARDS
        frontier = RedisFrontier(redis, keys, 0, 1, 30_000)
        await frontier.prepare()
        meta = await redis.hgetall(keys.meta)
        assert meta[b"shard_tags"] == b"even"
        # Never "shards" without "shard_tags": the scheme is written first.
        order = [k.decode() for k in meta]
        assert order.index("queue_layout") < order.index("shard_tags") < order.index("shards")
        await frontier.add([entry(f"http://h{h}.test/p") for h in range(200)])
        names = [k async for k in redis.scan_iter(match="cp:{fresh/*", count=1000)]
        used = {tag_of(k) for k in names}
        even = {tag_of(p) for p in keys.shard_prefixes}
        assert used <= even and len(used) == NEW_CRAWL_SHARDS, used - even
        assert any("~" in t for t in used)  # most tags need their suffix
        # Read again by a worker or a command: the same names.
        again = await config(redis_url).open_keys(redis, "fresh", adopt=True)
        assert again.shard_prefixes == keys.shard_prefixes
        # Plain names on this crawl, or on a new one, are refused.
        with pytest.raises(FrontierMismatch, match="shard_tags=even"):
            await RedisFrontier(redis, CrawlKeys("fresh", 32, tags=PLAIN), 0, 1, 30_000).prepare()
        with pytest.raises(FrontierMismatch, match="plain shard tags are an older crawl's"):
            await RedisFrontier(redis, CrawlKeys("other", 4, tags=PLAIN), 0, 1, 30_000).prepare()
        # all_patterns (crawlproject reset, SCHEDULER_PERSIST=False) finds every key.
        await redis.set("cp:{freshness/0}:ready", "another crawl's")
        assert await delete_crawl(redis, keys) > len(names)
        # A set: SCAN may return a key twice while the dict shrinks after the
        # deletes (it did once: CI at 78bc565).
        assert {k async for k in redis.scan_iter(match="cp:{fresh*")} == {b"cp:{freshness/0}:ready"}
    finally:
        await redis.aclose()


async def make_older_crawl(redis: Redis, crawl: str, shards: int, urls: list[str]) -> CrawlKeys:
    """A crawl as a version before ``shard_tags`` made it: its meta written by
    hand (``shards``, ``queue_layout``, no ``shard_tags``), its URLs queued
    under plain tags."""
    keys = CrawlKeys(crawl, shards, tags=PLAIN)
    await redis.hset(keys.meta, mapping={
        "created": "1", "queue_layout": QUEUE_LAYOUT, "shards": str(shards),
        "priority_mode": "score", "seen_layout": "exact3", "host_keys": "server",
    })  # fmt: skip
    old = RedisFrontier(redis, keys, 0, 1, 30_000)
    await old.prepare()
    await old.add([entry(u) for u in urls])
    return keys


def test_an_older_crawl_keeps_its_plain_tags_and_a_worker_crawls_it(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """A URL queued under plain tags is claimed and fetched by a worker of this
    version (no seeds: the frontier's URL only); the crawl's keys stay plain,
    its meta gets no ``shard_tags``; even names are refused on it."""
    web = testweb_factory(hosts=1, pages=3, links=2, cross_links=0)
    planted = web.base_url(1) + "p/2"  # not the seed: only the frontier names it
    assert planted in web.expected_urls

    async def setup() -> CrawlKeys:
        redis = Redis.from_url(redis_url)
        try:
            keys = await make_older_crawl(redis, "older", 2, [planted])
            opened = await config(redis_url).open_keys(redis, "older")
            assert opened.tags == PLAIN and opened.shard_prefixes == keys.shard_prefixes
            with pytest.raises(FrontierMismatch, match="created with plain shard tags"):
                await RedisFrontier(redis, CrawlKeys("older", 2), 0, 1, 30_000).prepare()
            return keys
        finally:
            await redis.aclose()

    keys = asyncio.run(setup())
    worker = start_worker(REPO_ROOT, redis_url, "older", [], FAST, tmp_path / "w.log")
    assert wait_all([worker], timeout=120) == [0], worker.log_path.read_text()[-3000:]
    assert page_counts(web.log).get(planted) == 1, page_counts(web.log)
    assert stats_of(worker.log_path)["frontier/acks"] >= 1
    client = SyncRedis.from_url(redis_url)
    assert client.hget(keys.meta, "shard_tags") is None
    used = {tag_of(k) for k in client.scan_iter(match="cp:{older/*", count=1000)}
    used -= {t for t in used if t.startswith("older/dd")}
    assert used and used <= {"older/0", "older/1"}, used
    client.close()


# -- placement on a real Redis Cluster -------------------------------------------------


class MastersCluster(RedisCluster):
    """``masters`` masters, no replicas, made by ``redis-cli --cluster create``
    (an equal run of slots each)."""

    def __init__(self, masters: int) -> None:
        super().__init__()
        self.count = masters

    def start(self, timeout: float = 30.0) -> RedisCluster:
        self.nodes = [self._new_node() for _ in range(self.count)]
        subprocess.run(
            [self.cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=timeout,
        )  # fmt: skip
        self.wait_ok(timeout)
        return self


@pytest.mark.parametrize("masters", [3, 4])
def test_a_new_crawls_shards_split_evenly_over_a_real_cluster(masters: int) -> None:
    """32 shards of crawl ``bench`` (the benchmarks' crawl) over the masters of
    ``redis-cli --cluster create``: 11/11/10 on 3 (plain tags: 12/13/7), 8 each
    on 4 (plain: 9/9/7/7), counted from the keys each master holds; and for
    other names, from their tags' slots on the same cluster."""
    cluster = MastersCluster(masters).start()
    try:
        per_master = asyncio.run(fill(cluster))
        owners = cluster.slot_ranges()
        plain = Counter(
            owners.get(key_slot(p.encode() + b"ready"))
            for p in CrawlKeys("bench", NEW_CRAWL_SHARDS, tags=PLAIN).shard_prefixes
        )
    finally:
        cluster.stop()
    assert sum(per_master.values()) == NEW_CRAWL_SHARDS
    if masters == 3:
        assert sorted(per_master.values()) == [10, 11, 11]
        assert sorted(plain.values()) == [7, 12, 13]
    else:
        assert sorted(per_master.values()) == [8, 8, 8, 8]
        assert sorted(plain.values()) == [7, 7, 9, 9]
    # A master holds a run's shard iff it holds the run's start: the same for any name.
    for crawl in ("web", "tutorial", "news", "a-very_long.crawl-name"):
        prefixes = CrawlKeys(crawl, NEW_CRAWL_SHARDS).shard_prefixes
        counts = Counter(owners.get(key_slot(p.encode() + b"ready")) for p in prefixes)
        assert sorted(counts.values()) == sorted(per_master.values()), crawl


async def fill(cluster: RedisCluster) -> Counter[int]:
    """A new crawl's URLs of 400 hosts added through the cluster client; the
    shards whose keys each master holds."""
    redis = redis_client(cluster.url, outage_seconds=5)
    try:
        keys = await config(cluster.url).open_keys(redis, "bench")
        assert keys.tags == EVEN
        frontier = RedisFrontier(redis, keys, 0, 1, 30_000)
        await frontier.prepare()
        await frontier.add([entry(f"http://h{h}.test/p") for h in range(400)])
    finally:
        await redis.aclose()
    shards: Counter[int] = Counter()
    for port in cluster.masters().values():
        node = SyncRedis(port=port)
        tags = {tag_of(k) for k in node.scan_iter(match="cp:{bench/*", count=1000)}
        node.close()
        shards[port] = len({t for t in tags if not t.startswith("bench/dd")})
    return shards
