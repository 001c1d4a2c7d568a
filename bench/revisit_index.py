"""Redis bytes per stored payload of the index of stored payloads (revisit records).

    .venv/bin/python bench/revisit_index.py
    .venv/bin/python bench/revisit_index.py --payloads 100000  # quick
    (options: --payloads 1000000 --hosts 10000 --shards 32)

On a private redis-server (the first on PATH), N distinct payloads (random
SHA-1s) are claimed by the real ``RevisitIndex.claim`` (crawlproject/store/
revisits.py: one script call each, 64 in flight) with URLs of 60-80
characters over --hosts hosts, over a new crawl's 32 shards; then N claims of
the same payloads under other URLs (all found: each would be a revisit).

1. Memory: ``INFO used_memory`` after - before, / N; and ``MEMORY USAGE``
   summed over the ``wd`` hashes, / N.
2. Rate: claims/s of new payloads and of payloads found (one client, 64 in
   flight).

Writes bench/results/revisit_index.json and prints a Markdown summary.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from benchlib import RedisServer, write_result
from redis.asyncio import Redis as AsyncRedis

from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.store.revisits import RevisitIndex

CRAWL = "rv"
SECTIONS = ("news/world/eu", "archive/2024/05", "products/item/detail", "blog/posts/eng",
            "docs/reference/api/v2", "category/misc/all-items", "about/company/team")  # fmt: skip
START = datetime(2026, 1, 1, tzinfo=UTC)
IN_FLIGHT = 64


def url(k: int, hosts: int) -> str:
    i = (k * 2654435761) % hosts
    return (
        f"https://www.host{i:05d}.example.com/{SECTIONS[k % 7]}/{k % 89:02d}/article-{k:08d}.html"
    )


async def claim_all(
    index: RevisitIndex, digests: list[bytes], hosts: int, offset: int
) -> tuple[float, int]:
    found = 0
    t0 = time.perf_counter()
    for start in range(0, len(digests), IN_FLIGHT):
        batch = digests[start : start + IN_FLIGHT]
        results = await asyncio.gather(*(
            index.claim(d, url(start + i + offset, hosts), START + timedelta(seconds=start + i))
            for i, d in enumerate(batch)
        ))  # fmt: skip
        found += sum(r is not None for r in results)
    return time.perf_counter() - t0, found


async def run(srv: RedisServer, n: int, hosts: int, shards: int) -> dict[str, Any]:
    redis = AsyncRedis.from_url(srv.url)
    keys = CrawlKeys(CRAWL, shards)
    index = RevisitIndex(redis, keys)
    rng = random.Random(7)
    digests = [rng.randbytes(20) for _ in range(n)]
    url_chars = sum(len(url(k, hosts)) for k in range(n)) / n
    before = int((await redis.info("memory"))["used_memory"])
    new_s, found_new = await claim_all(index, digests, hosts, 0)
    after = int((await redis.info("memory"))["used_memory"])
    usage = 0
    for shard in range(shards):
        usage += int(await redis.memory_usage(keys.payload_digests(shard), samples=0) or 0)
    again_s, found_again = await claim_all(index, digests, hosts, n)
    await redis.aclose()
    assert found_new == 0 and found_again == n, (found_new, found_again)
    return {
        "payloads": n, "hosts": hosts, "shards": shards, "url_chars_mean": round(url_chars, 1),
        "used_memory_per_payload": round((after - before) / n, 2),
        "memory_usage_per_payload": round(usage / n, 2),
        "claims_new_per_s": round(n / new_s), "claims_found_per_s": round(n / again_s),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--payloads", type=int, default=1_000_000)
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--shards", type=int, default=NEW_CRAWL_SHARDS)
    args = ap.parse_args()
    srv = RedisServer()
    try:
        result = asyncio.run(run(srv, args.payloads, args.hosts, args.shards))
    finally:
        srv.stop()
    result["command"] = shlex.join([".venv/bin/python", *sys.argv])
    out = write_result("revisit_index.json", result)
    print(f"| index of stored payloads, {result['payloads']:,} payloads, URLs of "
          f"{result['url_chars_mean']} chars, {result['shards']} shards | "
          f"**{result['used_memory_per_payload']} B/payload** (used_memory; "
          f"MEMORY USAGE {result['memory_usage_per_payload']}); claims/s new "
          f"{result['claims_new_per_s']:,}, found {result['claims_found_per_s']:,} | "
          f"`{result['command']}` |")  # fmt: skip
    print(f"(written to {out})")


if __name__ == "__main__":
    main()
