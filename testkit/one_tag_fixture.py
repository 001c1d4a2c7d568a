"""Captures a one-tag duplicate index, as the code before issue 42 made it, as
a test fixture (tests/data/dedupe_one_tag.json): the "older data" that
``crawlproject dedupe migrate`` reads (tests/test_dedupe_migrate.py). A test
never builds old data with new code: it restores these keys.

Run once, on the commit that still had the one-tag layout (7bca5c2's code,
``DedupeIndex(parts=0)``; the layout was removed after it)::

    .venv/bin/python -m testkit.one_tag_fixture [tests/data/dedupe_one_tag.json]

On a fresh real redis-server it makes crawl ``old``'s index with parts=0
(k = 3, a small load and first near level, so buckets split and the
linear-hashing state is not the first one), adds 320 pages in batches (new
pages with and without a SimHash, exact copies under other URLs, near copies
at distances 1..k and k + 1, a page checked again under its own URL) over
six hosts, and writes every key of the server (each as its type and raw
value, hex: restored with SET / HSET, on any redis-server version) and every
page added with the verdict it got. Seeded: the same run gives the same file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from testkit.redis_server import RedisServer

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "dedupe_one_tag.json"
CRAWL = "old"
K = 3
LOAD = 4  # entries a bucket: a few hundred pages split buckets
NEAR_MIN_LEVEL = 4
HOSTS = [f"h{i}.example" for i in range(6)]


def _flip(simhash: int, bits: int, rng: random.Random) -> int:
    for bit in rng.sample(range(64), bits):
        simhash ^= 1 << bit
    return simhash


def _pages(rng: random.Random) -> list[tuple[bytes, int | None, str, str]]:
    """(digest, simhash, url, host) in the order they are checked."""
    pages: list[tuple[bytes, int | None, str, str]] = []
    originals: list[tuple[bytes, int | None, str, str]] = []

    def page(n: int, simhash: int | None, body: bytes | None = None) -> None:
        host = rng.choice(HOSTS)
        digest = hashlib.sha1(body if body is not None else b"body %d" % n).digest()
        pages.append((digest, simhash, f"http://{host}/p{n}", host))

    for n in range(140):  # distinct pages, 20 of them with no SimHash (exact test only)
        page(n, None if n % 7 == 0 else rng.getrandbits(64))
        originals.append(pages[-1])
    for n in range(140, 320):
        digest, simhash, url, host = rng.choice(originals)
        kind = n % 6
        if kind in (0, 1):  # an exact copy under another URL
            pages.append((digest, simhash, f"http://{rng.choice(HOSTS)}/copy{n}", host))
        elif kind == 5 and n % 12 == 5:  # the same page again under its own URL
            pages.append((digest, simhash, url, host))
        else:  # a near copy at distance 1..k (kind 2..4), or k + 1 (new)
            bits = kind - 1 if kind < 5 else K + 1
            near = _flip(simhash if simhash is not None else rng.getrandbits(64), bits, rng)
            page(n, near)
    return pages


def _hex(value: bytes | str) -> str:
    return (value.encode() if isinstance(value, str) else value).hex()


async def dump_keys(redis: Redis) -> dict[str, dict[str, Any]]:
    """Every key of the server: {key hex: {"type", "value"}} (a string's bytes
    in hex; a hash's {field hex: value hex})."""
    out: dict[str, dict[str, Any]] = {}
    async for key in redis.scan_iter(count=1000):
        kind = (await redis.type(key)).decode()
        if kind == "string":
            value: Any = _hex(await redis.get(key))
        elif kind == "hash":
            value = {_hex(f): _hex(v) for f, v in (await redis.hgetall(key)).items()}
        else:
            raise ValueError(f"unexpected key type {kind} of {key!r}")
        out[_hex(key)] = {"type": kind, "value": value}
    return dict(sorted(out.items()))


async def restore_keys(redis: Redis, keys: dict[str, dict[str, Any]]) -> None:
    """Writes ``dump_keys``' keys back (for the tests)."""
    for key, entry in keys.items():
        name = bytes.fromhex(key)
        if entry["type"] == "string":
            await redis.set(name, bytes.fromhex(entry["value"]))
        else:
            fields = {bytes.fromhex(f): bytes.fromhex(v) for f, v in entry["value"].items()}
            await redis.hset(name, mapping=fields)  # type: ignore[arg-type]


async def capture(url: str) -> dict[str, Any]:
    # Imported here: the module stays importable (restore_keys) once the
    # one-tag layout is gone.
    from crawlproject.dedupe.fingerprint import FEATURES_VERSION
    from crawlproject.dedupe.index import DedupeIndex
    from crawlproject.frontier.store.keys import CrawlKeys

    redis = Redis.from_url(url)
    index = DedupeIndex(
        redis, CrawlKeys(CRAWL, 2), k=K, record_originals=True,
        features_version=FEATURES_VERSION, load=LOAD, near_min_level=NEAR_MIN_LEVEL, parts=0,
    )  # fmt: skip
    rng = random.Random(42)
    pages = _pages(rng)
    added = []
    for at in range(0, len(pages), 16):  # batches, as a worker sends them
        batch = pages[at : at + 16]
        for (digest, simhash, page_url, host), verdict in zip(
            batch, await index.check_and_add_many(batch), strict=True
        ):
            added.append({
                "digest": digest.hex(), "simhash": None if simhash is None else f"{simhash:016x}",
                "url": page_url, "host": host, "kind": verdict.kind.value,
                "same_url": verdict.same_url, "original": verdict.original,
                "distance": verdict.distance, "streak": verdict.host_streak,
            })  # fmt: skip
    keys = await dump_keys(redis)
    version = (await redis.info("server"))["redis_version"]
    await redis.aclose()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "about": "one-tag duplicate index made by testkit/one_tag_fixture.py (see its docstring)",
        "commit": commit, "redis_version": version, "crawl": CRAWL, "k": K,
        "features_version": FEATURES_VERSION, "load": LOAD, "near_min_level": NEAR_MIN_LEVEL,
        "pages": added, "keys": keys,
    }  # fmt: skip


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    with RedisServer() as server:
        data = asyncio.run(capture(server.url))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    kinds: dict[str, int] = {}
    for page in data["pages"]:
        kinds[page["kind"]] = kinds.get(page["kind"], 0) + 1
    print(f"{out}: {len(data['pages'])} pages {kinds}, {len(data['keys'])} keys")


if __name__ == "__main__":
    main()
