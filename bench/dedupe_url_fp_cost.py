"""What recognising a page's own URL without the originals would cost Redis in
memory, stored as the originals are but with an 8-byte URL fingerprint for the
URL: per page, a field (page id bytes 3-8) of one of 65,536 hashes (id bytes
1-2), valued 8 bytes (docs/duplicates.md, "A page checked again under its own
URL": why this was left).

    .venv/bin/python bench/dedupe_url_fp_cost.py [--index-pages 1000000 100000000 --sample 1000000]

On a redis-server of its own: for each index size, ``--sample`` random entries
over as many hashes as hold that many entries each in an index of that size
(65,536 x sample / index pages: the same entries a hash, so the same
encoding: a listpack up to ``hash-max-listpack-entries``, then a hash table);
prints ``used_memory`` grown, per entry. Not a timing.
"""

from __future__ import annotations

import argparse
import json
import os

import benchlib  # noqa: F401  (puts the repository on sys.path: testkit/, crawlproject/)
import redis

from testkit.redis_server import RedisServer

ORIGINALS_HASHES = 65536  # page id bytes 1-2 (spread.py originals_of)


def cost(client: redis.Redis, index_pages: int, sample: int) -> dict[str, float | int]:
    client.flushall()
    hashes = max(1, round(ORIGINALS_HASHES * sample / index_pages))
    before = int(client.info("memory")["used_memory"])
    pipe = client.pipeline(transaction=False)
    for n in range(sample):
        page_id = os.urandom(8)
        key = b"o:%d" % (int.from_bytes(page_id[:2], "big") % hashes)
        pipe.hsetnx(key, page_id[2:8], os.urandom(8))
        if n % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()
    grown = int(client.info("memory")["used_memory"]) - before
    return {
        "index_pages": index_pages,
        "entries_a_hash": round(sample / hashes),
        "bytes_per_page": round(grown / sample, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-pages", type=int, nargs="+", default=[1_000_000, 100_000_000])
    ap.add_argument("--sample", type=int, default=1_000_000)
    args = ap.parse_args()
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        version = client.info("server")["redis_version"]
        listpack = client.config_get("hash-max-listpack-entries")
        for index_pages in args.index_pages:
            row = cost(client, index_pages, args.sample)
            print(json.dumps({**row, "redis": version, **listpack}))
        client.close()


if __name__ == "__main__":
    main()
