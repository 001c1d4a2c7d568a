"""What the replies kept for calls sent again cost Redis in memory (lua.py
once_per_call: a script that writes keeps its reply under ``c:<call id>`` for
the client's outage bound + 30 s).

    .venv/bin/python bench/call_reply_bytes.py [--hosts 2000 --pages 200 --claim 64]

On a redis-server of its own: a crawl of 32 shards gets ``--pages`` adds of
50 links (URLs of ~75 characters over 10 hosts each, hosts among
``--hosts``), one claim of ``--claim`` a shard (one URL a host: the default
host concurrency), a release and an ack of every lease. Prints, per kind of
reply (claim, add, the others), the calls, their key and value bytes and
``MEMORY USAGE`` a key, and a claim's bytes per request it handed out. Not a
timing: the same at any load.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import defaultdict

import benchlib  # noqa: F401  (puts the repository on sys.path: testkit/, crawlproject/)
from redis.asyncio import Redis
from scrapy import Request

from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import NewEntry, RedisFrontier, Release
from testkit.redis_server import RedisServer

CANON = UrlCanonicalizer([])
CODEC = RequestCodec(["scrapy.http.request.Request"])


def entry(url: str) -> NewEntry:
    canonical = CANON.canonicalize(url)
    return NewEntry(
        pkey=host_key(canonical),
        fingerprint=CANON.fingerprint(canonical),
        dont_filter=False,
        data=CODEC.encode(Request(url), None),
    )


async def measure(url: str, hosts: int, pages: int, claim: int) -> None:
    r = Redis.from_url(url)
    f = RedisFrontier(r, CrawlKeys("web", 32), 0, 1, 60_000)
    await f.prepare()
    names = [f"www.site{h}.example.com" for h in range(hosts)]
    for page in range(pages):
        links = [
            f"https://{names[(page * 7 + i) % hosts]}/articles/2026/11/some-title-{page}-{i}.html"
            for i in range(50)
        ]
        await f.add([entry(u) for u in links])
    leases = []
    for shard in range(f.keys.shards):
        leases += [
            lease for lease, _ in (await f.claim(shard, claim, "crawlproject-worker:h:1")).items
        ]
    await f.release([Release(lease, 5) for lease in leases])
    await f.ack(leases)
    # A reply's first msgpack byte tells its kind: add's is an array of 12
    # (0x9c), a claim's a longer one (0xdc), ack's an array of 3 (0x93);
    # release answers a number.
    kinds: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    async for key in r.scan_iter(match="cp:{web*}:c:*", count=1000):
        value = await r.get(key)
        kind = {0x9C: "add", 0xDC: "claim", 0x93: "ack"}.get(value[0], "release")
        kinds[kind].append((len(key), len(value), int(await r.memory_usage(key, samples=0))))
    for kind, rows in sorted(kinds.items()):
        n = len(rows)
        key_b, value_b, memory = (sum(row[i] for row in rows) / n for i in range(3))
        print(
            f"{kind:8} {n:6} calls: key {key_b:.0f} B, value {value_b:.0f} B, "
            f"MEMORY USAGE {memory:.0f} B"
        )
    claims = kinds["claim"]
    if claims and leases:
        per = sum(row[2] for row in claims) / len(leases)
        print(
            f"claim: {len(leases)} requests in {len(claims)} calls, "
            f"{per:.0f} B a request handed out"
        )
    await r.aclose()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--pages", type=int, default=200)
    p.add_argument("--claim", type=int, default=64)
    a = p.parse_args()
    server = RedisServer().start()
    try:
        asyncio.run(measure(server.url, a.hosts, a.pages, a.claim))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
