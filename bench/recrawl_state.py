"""Redis bytes per tracked URL, and how fast due URLs are promoted into the frontier.

    .venv/bin/python bench/recrawl_state.py
    .venv/bin/python bench/recrawl_state.py --urls 100000  # quick
    (options: --urls 1000000 --hosts 10000 --batch 1000)

On a private redis-server (the first on PATH), N distinct URLs (60-80
characters, over --hosts hosts, 4 shards as by default) get a realistic fetch
state (crawlproject/recrawl/schedule.py: fetched 3 times, digest and SimHash,
an ETag on half of them, a Last-Modified on 80 %), written by the real
``RecrawlStore.write`` (pipelined, --batch per round trip), all due now.

1. Memory: ``MEMORY USAGE key SAMPLES 0`` summed over the ``fs:*`` hashes and
   the ``rdue`` schedules, / N; and ``INFO used_memory`` after - before, / N.
2. Promotion: every shard promoted by the real ``recrawl_promote.lua``
   (``RecrawlStore.promote``, batches of CRAWL_RECRAWL_BATCH = 1,000) until the
   schedule is empty; URLs/s = N / wall time. Baseline in the same run: the same
   N URLs, after FLUSHALL, queued as new URLs by the frontier's own ``add``
   script (RedisFrontier.add, seen test included, batches of 1,000): the ratio
   says what a recrawl costs against the discovery of a URL.

Writes bench/results/recrawl_state.json and prints a Markdown summary.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import sys
import time
from datetime import UTC, datetime
from typing import Any

from benchlib import RedisServer, write_result
from redis.asyncio import Redis as AsyncRedis

from crawlproject import default_settings as ds
from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import NewEntry, RedisFrontier
from crawlproject.recrawl.schedule import FetchState, encode_state
from crawlproject.recrawl.store import RecrawlStore, StateWrite

CRAWL = "rc"
SHARDS = NEW_CRAWL_SHARDS
SECTIONS = ("news/world/eu", "archive/2024/05", "products/item/detail", "blog/posts/eng",
            "docs/reference/api/v2", "category/misc/all-items", "about/company/team")  # fmt: skip
NOW_S = 1_790_000_000


def host(k: int, hosts: int) -> str:
    i = (k * 2654435761) % hosts
    return f"127.0.{i // 250}.{i % 250 + 1}:8080"


def url(k: int, h: str) -> str:
    return f"http://{h}/{SECTIONS[k % 7]}/{k % 89:02d}/article-{k:08d}.html"


def state(k: int, u: str, rng: random.Random) -> FetchState:
    return FetchState(
        url=u, depth=1 + k % 5, last_fetch_s=NOW_S - 86400, interval_s=846720, fetches=3,
        changes=k % 2, gone=0, digest=f"{rng.getrandbits(64):016x}",
        simhash=f"{rng.getrandbits(64):016x}",
        etag=f'W/"{rng.getrandbits(32):x}-{rng.getrandbits(24):x}"' if k % 2 else "",
        last_modified="Thu, 01 Jan 2026 00:00:00 GMT" if k % 5 else "",
    )  # fmt: skip


async def write_states(srv: RedisServer, n: int, hosts: int, batch: int) -> tuple[float, float]:
    redis = AsyncRedis.from_url(srv.url)
    store = RecrawlStore(redis, CrawlKeys(CRAWL, SHARDS))
    canon = UrlCanonicalizer(ds.CRAWL_SESSION_PARAMS)
    rng = random.Random(7)
    state_bytes = 0
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        writes = []
        for k in range(start, min(n, start + batch)):
            h = host(k, hosts)
            u = url(k, h)
            text = encode_state(state(k, u, rng))
            state_bytes += len(text)
            writes.append(StateWrite(host_key(u), canon.fingerprint(u), text, NOW_S - k % 3600))
        await store.write(writes)
    await redis.aclose()
    return time.perf_counter() - t0, state_bytes / n


async def promote_all(srv: RedisServer, batch: int) -> tuple[int, float]:
    redis = AsyncRedis.from_url(srv.url)
    store = RecrawlStore(redis, CrawlKeys(CRAWL, SHARDS))
    promoted = 0
    t0 = time.perf_counter()
    for shard in range(SHARDS):
        while True:
            r = await store.promote(shard, NOW_S, batch, 10**12, 1000, 1, "parse", "on_error")
            promoted += r.promoted
            if r.promoted + r.lost < batch:
                break
    elapsed = time.perf_counter() - t0
    await redis.aclose()
    return promoted, elapsed


async def add_all(srv: RedisServer, n: int, hosts: int, batch: int) -> float:
    """The baseline: the same URLs as new URLs through the frontier's add script."""
    redis = AsyncRedis.from_url(srv.url)
    keys = CrawlKeys(CRAWL, SHARDS)
    frontier = RedisFrontier(redis, keys, 1000, 1, 60_000)
    await frontier.prepare()
    canon = UrlCanonicalizer(ds.CRAWL_SESSION_PARAMS)
    codec = RequestCodec(ds.CRAWL_REQUEST_CLASSES)
    from scrapy import Request

    entries = []
    for k in range(n):
        h = host(k, hosts)
        u = url(k, h)
        data = codec.encode(Request(u, meta={"depth": 1 + k % 5}), None)
        entries.append(NewEntry(host_key(u), canon.fingerprint(u), False, data, 1 + k % 5))
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        await frontier.add(entries[start : start + batch])
    elapsed = time.perf_counter() - t0
    await redis.aclose()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1_000)
    args = ap.parse_args()
    n = args.urls
    srv = RedisServer()
    try:
        # The promote script decides the crawl's mode from each shard's key.
        for prefix in CrawlKeys(CRAWL, SHARDS).shard_prefixes:
            srv.client.set(prefix + "mode", "score")
        before = srv.used_memory()
        write_s, text_bytes = asyncio.run(write_states(srv, n, args.hosts, args.batch))
        used = srv.used_memory() - before
        usage = srv.usage_by_kind(
            "cp:*", lambda key: "fs" if ":fs:" in key else "rdue" if key.endswith(":rdue") else ""
        )
        encodings = {
            srv.client.object("encoding", key).decode()
            for key in srv.client.scan_iter(match="cp:*:fs:*", count=1000)
            if random.random() < 0.01
        }
        promoted, promote_s = asyncio.run(promote_all(srv, args.batch))
        assert promoted == n, (promoted, n)
        srv.client.flushall()
        add_s = asyncio.run(add_all(srv, n, args.hosts, args.batch))
        versions = srv.versions()
    finally:
        srv.stop()
    res: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "urls": n,
        "hosts": args.hosts,
        "versions": versions,
        "state_text_bytes_per_url": text_bytes,
        "fs_bytes_per_url": usage["fs"][1] / n,
        "rdue_bytes_per_url": usage["rdue"][1] / n,
        "used_memory_bytes_per_url": used / n,
        "fs_encodings": sorted(encodings),
        "write_urls_per_s": n / write_s,
        "promote_urls_per_s": promoted / promote_s,
        "add_new_urls_per_s": n / add_s,
    }
    res["promote_over_add"] = res["promote_urls_per_s"] / res["add_new_urls_per_s"]
    out = write_result("recrawl_state.json", res)
    print(f"`{res['command']}` ({res['when']}, redis {versions['redis_server']})\n")
    print(f"- {n:,} tracked URLs over {args.hosts:,} hosts; state text "
          f"{text_bytes:.1f} B/URL")  # fmt: skip
    print(f"- Redis: fs hashes {res['fs_bytes_per_url']:.1f} B/URL ({', '.join(encodings)}), "
          f"rdue {res['rdue_bytes_per_url']:.1f} B/URL; used_memory "
          f"{res['used_memory_bytes_per_url']:.1f} B/URL")  # fmt: skip
    print(f"- promotion {res['promote_urls_per_s']:,.0f} URLs/s vs adding new URLs "
          f"{res['add_new_urls_per_s']:,.0f} URLs/s (ratio {res['promote_over_add']:.2f}); "
          f"state writes {res['write_urls_per_s']:,.0f} URLs/s")  # fmt: skip
    print(f"Results: {out}")


if __name__ == "__main__":
    main()
