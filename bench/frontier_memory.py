"""Redis memory per seen URL and per queued URL, ours vs scrapy-redis.

    .venv/bin/python bench/frontier_memory.py [--urls 1000000] [--hosts 10000]
    .venv/bin/python bench/frontier_memory.py --urls 100000      # quick mode

On a private redis-server, N distinct URLs (60-80 characters, over --hosts hosts)
go through the real ``add`` script (RedisFrontier.add, --batch entries per call),
each as the spider would make it: Request(url, callback=parse, errback=on_error,
meta={"depth": d, "crawl_scope": "127.0.3.7:8080"}) encoded by RequestCodec.
Then, exactly (``MEMORY USAGE key SAMPLES 0``, summed over a SCAN):

* seen bytes/URL   = the ``seen`` hash and ``seen:*`` strings / N (the exact seen
  set; its growth to 100M URLs, and the Bloom filter: bench/frontier_growth.py)
* queued bytes/URL = the host queues ``q:*`` (band lists; the AOPIC run: one
  ZSET per host, and its ``b:*`` hashes of bodies) + ``h:*`` hashes + the
  ``ready`` zset and ``due:*`` lists (+ ``db``, their band mask) / N; the
  requests are stored as codec.py's compact form, their URL after the host key
* and ``INFO memory used_memory`` after - before, / N (includes the keyspace table),
  once the replies the add calls kept for a resend (``c:`` keys, lua.py
  once_per_call) have expired: a crawl holds those of its last seconds of calls,
  whatever the URLs it knows (their bytes at the load's end are in the JSON)

Baseline, same run after FLUSHALL: scrapy-redis 0.9.1 RFPDupeFilter (SADD of the
40-hex SHA1) and PriorityQueue (pickled request dict in a ZSET) for the same URLs.

Payloads are made by templates, checked byte for byte at startup against the real
code paths (UrlCanonicalizer, host_key, RequestCodec.encode; RFPDupeFilter.
request_fingerprint, PriorityQueue._encode_request): memory depends only on the
stored bytes, and templates load 1M URLs in seconds instead of minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import pickle
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import scrapy_redis
from benchlib import (
    PROBE_DEPTH,
    PROBE_SCOPE,
    PROBE_URL,
    RedisServer,
    fill_probe,
    url_depth,
    write_result,
)
from redis.asyncio import Redis as AsyncRedis
from scrapy import Request, Spider
from scrapy_redis.dupefilter import RFPDupeFilter
from scrapy_redis.queue import PriorityQueue

from crawlproject import default_settings as ds
from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.store.codec import RequestCodec, stored_form, url_of
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import NewEntry, RedisFrontier
from crawlproject.lua import CALL_REPLY_MARGIN_SECONDS

CRAWL = "mem"
TARGET_SEEN_BYTES = 16  # the target; scrapy-redis was measured at 88
THEIR_SEEN_KEY, THEIR_QUEUE_KEY = "mem:dupefilter", "mem:requests"
# Path shapes of varying length, so URLs spread over 60-80 characters.
SECTIONS = (
    "news/world/eu",
    "archive/2024/05",
    "products/item/detail",
    "blog/posts/engineering",
    "docs/reference/api/v2",
    "category/misc/all-items",
    "about/company/team",
)


class MemSpider(Spider):
    """Stand-in for the web spider: callbacks are stored by method name."""

    name = "mem"

    def parse(self, response: Any) -> None: ...

    def on_error(self, failure: Any) -> None: ...


class Urls:
    """URL k: a pure function of k, so the same N URLs go to both systems."""

    def __init__(self, hosts: int, depth: Callable[[int], int] = url_depth) -> None:
        self.hosts = hosts
        self.depth = depth  # URL k's depth, its band in depth order
        self.spider = MemSpider()
        self.canon = UrlCanonicalizer(ds.CRAWL_SESSION_PARAMS)
        self._their_dict = self.request(0).to_dict(spider=self.spider)
        # The codec's own output for a probe request: key order etc. follow the codec.
        probe = Request(
            PROBE_URL,
            callback=self.spider.parse,
            errback=self.spider.on_error,
            meta={"depth": PROBE_DEPTH, "crawl_scope": PROBE_SCOPE},
        )
        codec = RequestCodec(ds.CRAWL_REQUEST_CLASSES)
        self._template = codec.encode(probe, self.spider).decode()

    def host(self, k: int) -> str:
        i = (k * 2654435761) % self.hosts  # spreads consecutive k over the hosts
        return f"127.0.{i // 250}.{i % 250 + 1}:8080"

    def url(self, k: int, host: str) -> str:
        return f"http://{host}/{SECTIONS[k % 7]}/{k % 89:02d}/article-{k:08d}.html"

    def meta(self, k: int, host: str) -> dict[str, Any]:
        return {"depth": self.depth(k), "crawl_scope": host}

    def request(self, k: int) -> Request:
        host = self.host(k)
        return Request(
            self.url(k, host),
            callback=self.spider.parse,
            errback=self.spider.on_error,
            meta=self.meta(k, host),
        )

    def ours(self, k: int, tiny: bool = False) -> NewEntry:
        host = self.host(k)
        url = self.url(k, host)  # already canonical (checked in verify)
        data = b"" if tiny else fill_probe(self._template, url, self.depth(k), host)
        return NewEntry(host_key(url), self.canon.fingerprint(url), False, data)

    def theirs(self, k: int) -> tuple[str, bytes]:
        host = self.host(k)
        url = self.url(k, host)
        fp_json = json.dumps({"method": "GET", "url": url, "body": ""}, sort_keys=True)
        d = dict(self._their_dict, url=url, meta=self.meta(k, host))
        return hashlib.sha1(fp_json.encode()).hexdigest(), pickle.dumps(d, protocol=-1)

    def verify(self, n_urls: int, sample: int = 500) -> None:
        """Template bytes == real code path bytes, on a random sample of the N URLs."""
        codec = RequestCodec(ds.CRAWL_REQUEST_CLASSES)
        df = RFPDupeFilter(None, "k")
        queue = PriorityQueue(server=None, spider=self.spider, key="k")
        for k in random.Random(1).sample(range(n_urls), min(sample, n_urls)):
            req = self.request(k)
            canonical = self.canon.canonicalize(req.url)
            real = NewEntry(
                host_key(canonical),
                self.canon.fingerprint(canonical, req.method, req.body),
                req.dont_filter,
                codec.encode(req, self.spider),
            )
            assert canonical == req.url and real == self.ours(k), k
            assert self.theirs(k) == (df.request_fingerprint(req), queue._encode_request(req)), k


# Keys of queued URLs: band lists, host hashes, ready/due sets; AOPIC's credits and bodies.
QUEUE_KINDS = ("q", "h", "ready", "due", "db", "b")


def _shard_kind(key: str) -> str:
    """cp:{mem/0~17}:seen:123 -> seen; cp:{mem}:meta -> meta (any tag)."""
    return key.split("}:", 1)[1].split(":", 1)[0]


def wait_for_expiry(srv: RedisServer, match: str, timeout: float) -> float:
    """Seconds until no key matches ``match`` (a SCAN drops the expired keys it
    meets); fails after ``timeout``."""
    start = time.perf_counter()
    while any(True for _ in srv.client.scan_iter(match=match, count=5000)):
        if time.perf_counter() - start > timeout:
            raise SystemExit(f"keys matching {match} still there after {timeout:.0f} s")
        time.sleep(1.0)
    return time.perf_counter() - start


def with_priority(e: NewEntry, depth: int, policy: str) -> NewEntry:
    """The entry's number as the scheduler sets it: depth policy, the URL's depth
    (its band); AOPIC, the credit a link brings (a page's 0.9 shared by 20 links)."""
    score = 0.9 / 20 if policy == "aopic" else float(depth)
    return NewEntry(e.pkey, e.fingerprint, e.dont_filter, e.data, score)


async def load_ours(
    srv: RedisServer, urls: Urls, n: int, batch: int, tiny: bool, policy: str
) -> float:
    """Adds URLs 0..n-1 through RedisFrontier.add; returns seconds spent in add."""
    r = AsyncRedis.from_url(srv.url)
    # The replies its calls keep for a resend (lua.py once_per_call) expire after the
    # client's outage bound + 30 s: 0 here, so that measure_ours waits 30 s, not 90.
    r.outage_seconds = 0.0  # type: ignore[attr-defined]
    mode = "credit" if policy == "aopic" else "score"
    f = RedisFrontier(r, CrawlKeys(CRAWL, NEW_CRAWL_SHARDS), 0, 1, 30_000, priority_mode=mode)
    await f.prepare()
    spent = added = 0.0
    for start in range(0, n, batch):
        entries = [
            with_priority(urls.ours(k, tiny), urls.depth(k), policy)
            for k in range(start, min(start + batch, n))
        ]
        t = time.perf_counter()
        res = await f.add(entries)
        spent += time.perf_counter() - t
        added += res.added
    await r.aclose()
    assert added == n, f"{added} of {n} URLs added: fingerprint collision or bug"
    return spent


def load_theirs(srv: RedisServer, urls: Urls, n: int, batch: int) -> float:
    """SADD + ZADD as request_seen + push send them (pipelined); returns seconds."""
    spent = 0.0
    for start in range(0, n, batch):
        pipe = srv.client.pipeline(transaction=False)
        for k in range(start, min(start + batch, n)):
            fp, data = urls.theirs(k)
            pipe.sadd(THEIR_SEEN_KEY, fp)
            pipe.zadd(THEIR_QUEUE_KEY, {data: 0})  # ZADD key -priority data, as push
        t = time.perf_counter()
        pipe.execute()
        spent += time.perf_counter() - t
    return spent


def measure_ours(
    srv: RedisServer, urls: Urls, n: int, batch: int, tiny: bool, policy: str = "depth"
) -> dict[str, Any]:
    srv.client.flushall()
    before = srv.used_memory()
    t = time.perf_counter()
    add_s = asyncio.run(load_ours(srv, urls, n, batch, tiny, policy))
    wall = time.perf_counter() - t
    # The call replies kept for a resend are not per-URL state: a crawl holds those of
    # its last 30-90 s of calls (calls per second, not URLs known). Counted as loaded,
    # then left to expire before the per-URL figures.
    calls = srv.usage_by_kind("cp:*:c:*", _shard_kind).get("c", [0, 0])
    waited = wait_for_expiry(srv, "cp:*:c:*", CALL_REPLY_MARGIN_SECONDS + 60)
    used = srv.used_memory() - before
    kinds = srv.usage_by_kind("cp:*", _shard_kind)
    per = {k: round(v[1] / n, 2) for k, v in kinds.items()}
    queued = sum(kinds.get(k, [0, 0])[1] for k in QUEUE_KINDS)
    return {
        "policy": policy,
        "seen_filter": "exact",
        "tiny_payloads": tiny,
        "urls": n,
        "seen_keys": kinds["seen"][0],
        "seen_bytes": kinds["seen"][1],
        "seen_bytes_per_url": round(kinds["seen"][1] / n, 2),
        "queued_bytes": queued,
        "queued_bytes_per_url": None if tiny else round(queued / n, 2),
        "by_kind_bytes_per_url": per,
        "keys_by_kind": {k: v[0] for k, v in kinds.items()},
        "used_memory_delta": used,
        "used_memory_per_url": round(used / n, 2),
        "call_reply_keys_at_load_end": calls[0],
        "call_reply_bytes_at_load_end": calls[1],
        "call_replies_expired_after_s": round(waited, 1),
        "load_wall_s": round(wall, 2),
        "add_s": round(add_s, 2),
        "add_urls_per_s": round(n / add_s),
    }


def measure_theirs(srv: RedisServer, urls: Urls, n: int, batch: int) -> dict[str, Any]:
    srv.client.flushall()
    before = srv.used_memory()
    t = time.perf_counter()
    spent = load_theirs(srv, urls, n, batch)
    wall = time.perf_counter() - t
    used = srv.used_memory() - before
    seen = int(srv.client.memory_usage(THEIR_SEEN_KEY, samples=0) or 0)
    queued = int(srv.client.memory_usage(THEIR_QUEUE_KEY, samples=0) or 0)
    assert srv.client.scard(THEIR_SEEN_KEY) == n == srv.client.zcard(THEIR_QUEUE_KEY)
    return {
        "urls": n,
        "seen_bytes": seen,
        "seen_bytes_per_url": round(seen / n, 2),
        "queued_bytes": queued,
        "queued_bytes_per_url": round(queued / n, 2),
        "used_memory_delta": used,
        "used_memory_per_url": round(used / n, 2),
        "load_wall_s": round(wall, 2),
        "redis_s": round(spent, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--urls", type=int, default=1_000_000)
    p.add_argument("--hosts", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=5000, help="entries per RedisFrontier.add call")
    p.add_argument(
        "--one-depth-per-host",
        action="store_true",
        help="every URL of a host at one depth (one band list a host), as the URLs "
        "were made until 2026-11-27; by default a host's URLs come at depths 1-5",
    )
    a = p.parse_args()
    n = a.urls
    urls = Urls(a.hosts, (lambda k: 1 + k % 5) if a.one_depth_per_host else url_depth)
    urls.verify(n)
    sample = [urls.ours(k) for k in range(0, n, max(1, n // 2000))]
    shape = {
        "url_chars": [
            min(len(url_of(e.data) or "") for e in sample),
            round(statistics.mean(len(url_of(e.data) or "") for e in sample), 1),
            max(len(url_of(e.data) or "") for e in sample),
        ],
        "our_request_bytes_mean": round(statistics.mean(len(e.data) for e in sample), 1),
        # as a host queue keeps it: the URL after the host key
        "our_stored_bytes_mean": round(
            statistics.mean(len(stored_form(e.data, e.pkey)) for e in sample), 1
        ),
        "their_pickle_bytes_mean": round(
            statistics.mean(len(urls.theirs(k)[1]) for k in range(0, n, max(1, n // 2000))), 1
        ),
    }
    srv = RedisServer()
    try:
        info = srv.versions(scrapy_redis=scrapy_redis.__version__)
        step = f"{n:,} URLs over {a.hosts:,} hosts"
        print(f"ours: {step} ...", flush=True)
        ours = measure_ours(srv, urls, n, a.batch, tiny=False)
        print(f"ours, AOPIC policy: {step} ...", flush=True)
        aopic = measure_ours(srv, urls, n, a.batch, tiny=False, policy="aopic")
        print(f"scrapy-redis: {step} ...", flush=True)
        theirs = measure_theirs(srv, urls, n, a.batch)
    finally:
        srv.stop()
    result = {
        "benchmark": "frontier_memory",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["bench/frontier_memory.py", *sys.argv[1:]]),
        "machine": info,
        "config": {
            "urls": n,
            "hosts": a.hosts,
            "batch": a.batch,
            "shards": NEW_CRAWL_SHARDS,
            "seen_filter": "exact",
            "depths": "one per host" if a.one_depth_per_host else "1-5 per host",
            **shape,
        },
        "target_seen_bytes_per_url": TARGET_SEEN_BYTES,
        "ours": ours,
        "ours_aopic": aopic,
        "scrapy_redis": theirs,
        "ratios_ours_over_scrapy_redis": {
            k: round(ours[k] / theirs[k], 3)
            for k in ("seen_bytes_per_url", "queued_bytes_per_url", "used_memory_per_url")
        },
    }
    report(result)
    print(f"\nwrote {write_result('frontier_memory.json', result)}")


def report(res: dict[str, Any]) -> None:
    c, o, t = res["config"], res["ours"], res["scrapy_redis"]
    print(
        f"\nRedis memory per URL: {c['urls']:,} URLs over {c['hosts']:,} hosts, "
        f"{c['shards']} shards, redis {res['machine']['redis_server']}; URL "
        f"{c['url_chars'][0]}-{c['url_chars'][2]} chars, request "
        f"{c['our_request_bytes_mean']:.0f} B compact, {c['our_stored_bytes_mean']:.0f} B stored "
        f"(scrapy-redis pickle "
        f"{c['their_pickle_bytes_mean']:.0f} B)"
    )
    head = f"{'bytes per URL':44} {'ours':>8} {'scrapy-redis':>13} {'ours/theirs':>12}"
    print(head + "\n" + "-" * len(head))
    rows = [
        (
            "seen set (exact, growing / RFPDupeFilter SET)",
            "seen_bytes_per_url",
        ),
        ("queued (q:* h:* ready due / PriorityQueue ZSET)", "queued_bytes_per_url"),
        ("INFO used_memory delta, all keys", "used_memory_per_url"),
    ]
    for label, key in rows:
        r = res["ratios_ours_over_scrapy_redis"][key]
        print(f"{label:44} {o[key]:>8.2f} {t[key]:>13.2f} {r:>12.3f}")
    a = res["ours_aopic"]
    print(
        f"AOPIC policy (a ZSET of fingerprints + b: hashes per host): queued "
        f"{a['queued_bytes_per_url']:.2f} B/URL, used_memory {a['used_memory_per_url']:.2f} B/URL, "
        f"add {a['add_urls_per_s']:,} URLs/s"
    )
    print(
        f"target: <= {TARGET_SEEN_BYTES} bytes per seen URL -> "
        f"{'met' if o['seen_bytes_per_url'] <= TARGET_SEEN_BYTES else 'NOT met'}"
    )
    print(
        "ours per key kind (bytes/URL): "
        + ", ".join(f"{k} {v}" for k, v in sorted(o["by_kind_bytes_per_url"].items()))
    )
    print(
        f"call replies kept for a resend at the load's end: {o['call_reply_keys_at_load_end']:,} "
        f"keys, {o['call_reply_bytes_at_load_end']:,} B (expired "
        f"{o['call_replies_expired_after_s']} s later, before the figures above)"
    )
    print(
        f"load: ours {o['add_urls_per_s']:,} URLs/s in RedisFrontier.add "
        f"({o['load_wall_s']:.1f} s wall with payload making); "
        f"scrapy-redis pipelined {t['load_wall_s']:.1f} s wall"
    )


if __name__ == "__main__":
    main()
