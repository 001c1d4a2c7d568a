"""The frontier as the crawl grows: Redis CPU per add and per page, and Redis
bytes per URL, at 1M, 10M and 100M seen URLs (the exact seen set and the Bloom
filter side by side), and Redis CPU per page at 1k, 100k and 1M hosts.

    .venv/bin/python bench/frontier_growth.py
    .venv/bin/python bench/frontier_growth.py --sizes 100000,1000000 --hosts 1000,10000 \\
        --duration 4 --rounds 2                                  # quick: a few minutes

**URLs seen.** For each size N and each filter (``exact``; ``bloom`` with
CRAWL_SEEN_CAPACITY = N, so the filter is full), a private redis-server holds
a crawl of 4 shards (RedisFrontier.prepare, which also makes the Bloom
filter) whose seen set holds N random 8-byte fingerprints, a quarter per
shard. Filling 100M through Lua would take hours here, so the sets are
*bulk-loaded*: testkit/seen_table.py writes, with pipelined SADDs (exact) and
SETRANGEs (Bloom), the sets and bits the script would have built from the same
fingerprints (same split rule, same members; the Bloom filter's same bits).
tests/test_seen_set.py checks that the loader and the script build the same
sets and bits; here a sample of loaded
fingerprints is checked seen through the real script, fresh ones new, and at
the smallest size the same set is also filled through the real script and its
memory compared. All servers stay up, and the measurements go round-robin over
them (``--rounds``), so every size is measured under the same load; medians.

* bytes per URL: ``INFO used_memory`` after the load minus before the crawl
  was prepared (on a Redis that has run a script: the ~120 KB of scripting
  state every frontier Redis has), / N (the Bloom filter: its full size / its
  capacity); and the marginal bytes per URL between two sizes;
* Redis CPU per seen test: INFO's used_cpu_sys + used_cpu_user delta over
  20,000 fingerprints through the seen set alone (testkit's driver around the
  real _seen.lua), 500 per call, half loaded (seen), half new;
* Redis CPU per add: the same delta over 20,000 links through the real
  ``add`` (RedisFrontier.add, 2,000 entries per call over 1,000 hosts, a
  templated request each), half seen, half new (these are queued);
* Redis CPU per page: bench/frontier_ops.py's frontier-mode driver (claim,
  release, 20 link adds of which half seen, ack; one process, 1,000 hosts x 4
  seeds) on top of the loaded set (queues cleared first), ``--duration`` s.

Each round adds 10,000 new URLs per server; a page run adds its own: N is the
size at the start.

**Hosts.** Each ``--hosts`` count on a redis-server of its own, seeded with the
same number of URLs, ``--host-urls`` (4 M: 4 per host at 1 M hosts, 4,000 at
1,000), through the real add (the exact seen set), so that only the number of
hosts differs: seeded with 4 per host instead, 1,000 hosts would hold 4,000
URLs and a seen set of 4,000 fingerprints, 1 M hosts 4 M, and the ratio would
mix the crawl's size into the host count. Then bench/frontier_ops.py's
``scenario`` (frontier mode, one driver) on each server in turn,
``--host-rounds`` rounds in alternating order, each round's driver with links
of its own (a namespace per round); medians. Redis CPU per page, and the
seeded Redis's bytes per URL (queued, with its seen entry). ``--sizes ""``
runs the hosts axis alone and keeps the URLs-seen axis of the last
frontier_growth.json (its date and commit are kept with it).

Writes bench/results/frontier_growth.json and bench/frontier_growth.png
(``--redraw``: the PNG again from the JSON). ``--thp``: every redis-server may
use transparent huge pages (a diagnostic: TLB misses against cache misses),
results in frontier_growth-thp.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import frontier_ops
import numpy as np
import redis
from benchlib import RedisServer
from redis.asyncio import Redis as AsyncRedis

from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import NewEntry, RedisFrontier
from crawlproject.frontier.store.seen_set import SeenFilter
from testkit.redis_server import RedisServer as TestRedisServer
from testkit.seen_table import SEEN_DRIVER, load_bloom, load_exact

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PICTURE = ROOT / "bench" / "frontier_growth.png"
CRAWL = frontier_ops.CRAWL  # the page driver's crawl
SHARDS = NEW_CRAWL_SHARDS
SAMPLE = 100_000  # loaded fingerprints kept per shard, for seen links
CALL = 500  # fingerprints per seen-test call (add.lua's ADD_CHUNK)
ADD_BATCH = 2000  # entries per RedisFrontier.add call: ~500 per shard
PER_ROUND = 20_000  # seen tests, and links added, per server per round
ADD_HOSTS = 1000
TARGET_RATIO = 1.3  # the issue: CPU per add at 100M within 1.3x of 1M
PAYLOAD = b'{"url":"http://h.test/archive/section-07/article-000123456.html","meta":{"depth":2}}'


# --thp: Redis may use transparent huge pages (jemalloc asked for them, Redis's
# own disable-thp off), to tell TLB misses from cache misses.
THP_MALLOC_CONF = "thp:always,metadata_thp:always"
THP = {"on": False}


class GrowthRedis(RedisServer):
    """benchlib's private redis-server, with huge pages allowed under --thp."""

    def __init__(self) -> None:
        TestRedisServer.__init__(self, extra_args=["--disable-thp", "no"] if THP["on"] else None)
        self.start()
        self.client = redis.Redis.from_url(self.url)


@dataclass
class Grown:
    """One loaded seen set on its own redis-server."""

    kind: str
    urls: int
    server: RedisServer
    samples: list[np.ndarray]
    row: dict[str, Any] = field(default_factory=dict)
    seen_us: list[float] = field(default_factory=list)
    add_us: list[float] = field(default_factory=list)

    @property
    def seen(self) -> SeenFilter:
        return SeenFilter() if self.kind == "exact" else SeenFilter("bloom", self.urls)


def frontier(url: str, seen: SeenFilter) -> tuple[AsyncRedis, RedisFrontier]:
    r = AsyncRedis.from_url(url)
    return r, RedisFrontier(r, CrawlKeys(CRAWL, SHARDS), 0, 1, 30_000, seen=seen)


async def prepare(url: str, seen: SeenFilter) -> None:
    r, f = frontier(url, seen)
    await f.prepare()
    await r.aclose()


def warm_scripting(srv: RedisServer) -> int:
    """used_memory once a script has called Redis: the scripting machinery
    (~120 KB here) is a cost of every frontier's Redis, not of its URLs."""
    srv.client.eval("redis.call('SET', KEYS[1], '1'); return redis.call('DEL', KEYS[1])", 1, "w")
    return srv.used_memory()


def grow(kind: str, n: int, seed: int) -> Grown:
    """A fresh server holding a crawl whose seen set has n URLs (loaded)."""
    srv = GrowthRedis()
    g = Grown(kind, n, srv, [])
    before = warm_scripting(srv)
    asyncio.run(prepare(srv.url, g.seen))
    keys = CrawlKeys(CRAWL, SHARDS)
    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    # Its own connection, closed before measuring: Redis counts a client's
    # query buffer (a Bloom segment is sent whole) in used_memory.
    loader = redis.Redis.from_url(srv.url)
    for shard in range(SHARDS):
        m = n // SHARDS + (1 if shard < n % SHARDS else 0)
        fps = rng.integers(0, 256, size=(m, 8), dtype=np.uint8)
        if kind == "exact":
            load_exact(loader, keys, shard, fps)
        else:
            load_bloom(loader, keys, shard, fps, g.seen.bloom(SHARDS))
        g.samples.append(fps[:SAMPLE].copy())
        del fps
    loader.close()
    time.sleep(0.2)  # the server frees the closed connection's buffers
    g.row = {
        "filter": kind,
        "urls": n,
        "load_s": round(time.perf_counter() - t, 1),
        "used_memory_bytes": srv.used_memory() - before,
        "bytes_per_url": round((srv.used_memory() - before) / n, 3),
        "keys": int(srv.client.dbsize()),
        # MEMORY USAGE of the seen set's keys alone (no keyspace table, no meta)
        "key_bytes_per_url": round(key_bytes(srv) / n, 3),
        "sample_check": check_sample(g, rng),
    }
    return g


def driver(srv: RedisServer) -> Callable[..., Any]:
    return srv.client.register_script(SEEN_DRIVER)


def check_sample(g: Grown, rng: np.random.Generator) -> dict[str, int]:
    """Through the real script: loaded fingerprints are seen, fresh ones new."""
    script, keys = driver(g.server), CrawlKeys(CRAWL, SHARDS)
    arg = g.seen.script_arg(SHARDS)
    missed = fresh_seen = 0
    for shard in range(SHARDS):
        prefix = keys.shard_prefixes[shard]
        loaded = [bytes(r) for r in g.samples[shard][:2000]]
        fresh = [rng.bytes(8) for _ in range(2000)]
        out = script(keys=[keys.ready(shard)], args=[prefix, arg, *loaded, *fresh])
        missed += out[:2000].count(b"0")
        fresh_seen += out[2000:].count(b"1")
    if missed or (g.kind == "exact" and fresh_seen):
        raise SystemExit(
            f"{g.kind} {g.urls:,}: the loaded set answers wrong ({missed}, {fresh_seen})"
        )
    return {
        "loaded_checked": 2000 * SHARDS,
        "fresh_checked": 2000 * SHARDS,
        "fresh_seen": fresh_seen,
    }


def lua_filled(n: int, seed: int) -> dict[str, float]:
    """The same set as grow('exact', n, seed), filled through the real script:
    its used_memory per URL, and its keys' exact bytes (MEMORY USAGE) per URL."""
    srv = GrowthRedis()
    try:
        before = warm_scripting(srv)
        asyncio.run(prepare(srv.url, SeenFilter()))
        filler = redis.Redis.from_url(srv.url)
        script, keys = filler.register_script(SEEN_DRIVER), CrawlKeys(CRAWL, SHARDS)
        arg = SeenFilter().script_arg(SHARDS)
        rng = np.random.default_rng(seed)
        for shard in range(SHARDS):
            m = n // SHARDS + (1 if shard < n % SHARDS else 0)
            fps = rng.integers(0, 256, size=(m, 8), dtype=np.uint8)
            prefix = keys.shard_prefixes[shard]
            for start in range(0, m, 5000):
                batch = [bytes(r) for r in fps[start : start + 5000]]
                script(keys=[keys.ready(shard)], args=[prefix, arg, *batch])
        # What the loader leaves out: the script and the slow log of its long calls.
        filler.script_flush()
        filler.slowlog_reset()
        filler.close()
        time.sleep(0.2)
        return {
            "used_memory_per_url": round((srv.used_memory() - before) / n, 3),
            "key_bytes_per_url": round(key_bytes(srv) / n, 3),
        }
    finally:
        srv.stop()


def key_bytes(srv: RedisServer) -> int:
    """MEMORY USAGE (SAMPLES 0: every element) of the crawl's seen-set keys."""
    total = 0
    keys = list(srv.client.scan_iter(match="cp:*:seen*", count=10_000))
    keys += list(srv.client.scan_iter(match="cp:*:bloom:*", count=10_000))
    for start in range(0, len(keys), 5000):
        pipe = srv.client.pipeline(transaction=False)
        for k in keys[start : start + 5000]:
            pipe.memory_usage(k, samples=0)
        total += sum(int(x or 0) for x in pipe.execute())
    return total


def measure_seen_tests(g: Grown, rng: random.Random) -> float:
    """Redis CPU µs per seen test, half seen, half new."""
    script, keys = driver(g.server), CrawlKeys(CRAWL, SHARDS)
    arg = g.seen.script_arg(SHARDS)
    calls = []
    for i in range(PER_ROUND // CALL):
        shard = i % SHARDS
        sample = g.samples[shard]
        fps = [bytes(sample[rng.randrange(len(sample))]) for _ in range(CALL // 2)]
        fps += [rng.randbytes(8) for _ in range(CALL // 2)]
        rng.shuffle(fps)
        calls.append((shard, fps))
    cpu0 = g.server.cpu_seconds()
    for shard, fps in calls:
        script(keys=[keys.ready(shard)], args=[keys.shard_prefixes[shard], arg, *fps])
    return (g.server.cpu_seconds() - cpu0) / PER_ROUND * 1e6


def measure_adds(g: Grown, rng: random.Random) -> float:
    """Redis CPU µs per link through add.lua, half seen, half new."""
    keys = CrawlKeys(CRAWL, SHARDS)
    hosts = [f"127.{i // 250}.{i % 250}.9:8080" for i in range(ADD_HOSTS)]
    shard_of = [keys.shard_of(h) for h in hosts]
    batches = []
    for _ in range(PER_ROUND // ADD_BATCH):
        batch = []
        for j in range(ADD_BATCH):
            h = rng.randrange(ADD_HOSTS)
            if j % 2:
                sample = g.samples[shard_of[h]]
                fp = bytes(sample[rng.randrange(len(sample))])
            else:
                fp = rng.randbytes(8)
            batch.append(NewEntry(pkey=hosts[h], fingerprint=fp, dont_filter=False, data=PAYLOAD))
        batches.append(batch)

    async def run() -> float:
        r, f = frontier(g.server.url, g.seen)
        await f.prepare()
        cpu0 = g.server.cpu_seconds()
        for batch in batches:
            await f.add(batch)
        spent = g.server.cpu_seconds() - cpu0
        await r.aclose()
        return spent

    return asyncio.run(run()) / PER_ROUND * 1e6


def clear_queues(srv: RedisServer) -> int:
    """Deletes every key but the seen set and the crawl's meta (queues, hosts,
    counters the per-add rounds left), so a page run starts from seeds."""
    doomed = []
    for key in srv.client.scan_iter(match="cp:*", count=10_000):
        kind = key.decode().split("}:", 1)[1].split(":", 1)[0]
        if kind not in ("seen", "bloom", "meta"):
            doomed.append(key)
    for start in range(0, len(doomed), 1000):
        srv.client.unlink(*doomed[start : start + 1000])
    return len(doomed)


def page_config(
    hosts: int, url: str, duration: float, max_pages: int, capacity: int, seeds_per_host: int = 4
) -> Any:
    return frontier_ops.Config(
        hosts=hosts,
        seeds_per_host=seeds_per_host,
        claim_n=64,
        links=20,
        seen_fraction=0.5,
        duration=duration,
        max_pages=max_pages,
        shards=SHARDS,
        url=url,
        seen_capacity=capacity,
    )


SEED_CHUNK = 20_000  # seeds per RedisFrontier.add call


def seed_in_chunks(system: str, cfg: Any) -> None:
    """frontier_ops.seed_ours (4 seeds per host through the real add), in chunks:
    one call of 400,000 seeds timed out writing to the socket."""
    links = frontier_ops.Links(frontier_ops.UrlSpace(cfg.hosts, 0), False)
    total = cfg.hosts * cfg.seeds_per_host

    async def go() -> None:
        r = redis_client(cfg.url)
        f = frontier_ops._frontier(r, cfg, system)
        await f.prepare()
        for start in range(0, total, SEED_CHUNK):
            await f.add([links.ours(k) for k in range(start, min(start + SEED_CHUNK, total))])
        await r.aclose()

    asyncio.run(go())


def page_run(g: Grown, duration: float, max_pages: int) -> dict[str, Any]:
    """frontier_ops' driver on top of the loaded set: the scenario's seeding
    without its FLUSHALL."""
    clear_queues(g.server)
    cfg = page_config(1000, g.server.url, duration, max_pages, g.urls if g.kind == "bloom" else 0)
    original = frontier_ops.seed
    frontier_ops.seed = lambda server, system, cfg, code=None: seed_in_chunks(system, cfg)
    try:
        return frontier_ops.scenario(g.server, "single", "ours", "frontier", 1, cfg)
    finally:
        frontier_ops.seed = original


def hosts_axis(
    counts: list[int], host_urls: int, rounds: int, duration: float, max_pages: int
) -> list[dict[str, Any]]:
    """Per host count: a redis-server seeded with host_urls URLs, then page runs
    round-robin over the servers (rounds alternating in order); medians."""
    servers: list[tuple[GrowthRedis, Any, dict[str, Any], list[dict[str, Any]]]] = []
    original = frontier_ops.seed
    frontier_ops.seed = lambda server, system, cfg, code=None: None  # seeded once, below
    try:
        for hosts in counts:
            srv = GrowthRedis()
            per_host = max(1, host_urls // hosts)
            cfg = page_config(hosts, srv.url, duration, max_pages, 0, per_host)
            print(f"seeding {hosts:,} hosts x {per_host:,} URLs ...", flush=True)
            empty, t = srv.used_memory(), time.perf_counter()
            seed_in_chunks("ours", cfg)
            row: dict[str, Any] = {
                "hosts": hosts,
                "seeds_per_host": per_host,
                "seeded_urls": hosts * per_host,
                "seed_s": round(time.perf_counter() - t, 1),
                "seeded_bytes_per_url": round((srv.used_memory() - empty) / (hosts * per_host), 1),
            }
            servers.append((srv, cfg, row, []))
        for rnd in range(rounds):
            for srv, cfg, row, runs in servers if rnd % 2 == 0 else servers[::-1]:
                r = frontier_ops.scenario(srv, "single", "ours", "frontier", 1, cfg, ns0=rnd)
                runs.append(r)
                print(
                    f"  round {rnd + 1}, {row['hosts']:,} hosts: "
                    f"{r['redis_cpu_us_per_page']} us/page, {r['pages_per_s']} pages/s",
                    flush=True,
                )
    finally:
        frontier_ops.seed = original
        for srv, *_ in servers:
            srv.stop()
    out = []
    for _, _, row, runs in servers:
        for key in PAGE_KEYS:
            row[key] = round(statistics.median(r[key] for r in runs), 3)
        row["redis_cpu_us_per_page_rounds"] = [r["redis_cpu_us_per_page"] for r in runs]
        row["pages_per_s_rounds"] = [r["pages_per_s"] for r in runs]
        out.append(row)
    return out


PAGE_KEYS = ("pages", "pages_per_s", "redis_cpu_us_per_page", "seen_hit_fraction", "seconds")


def draw(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (pages, adds, mem, hosts_ax) = plt.subplots(1, 4, figsize=(19, 4.6))
    for kind, style in (("exact", "o-"), ("bloom", "s--")):
        rows = [r for r in result["seen"] if r["filter"] == kind]
        xs = [r["urls"] for r in rows]
        pages.plot(xs, [r["redis_cpu_us_per_page"] for r in rows], style, label=kind)
        adds.plot(xs, [r["add_us_per_link"] for r in rows], style, label=f"per add ({kind})")
        adds.plot(xs, [r["seen_test_us"] for r in rows], style, alpha=0.5,
                  label=f"per seen test ({kind})")  # fmt: skip
        mem.plot(xs, [r["bytes_per_url"] for r in rows], style, label=kind)
    for ax, title, unit in (
        (pages, "Redis CPU per page (1,000 hosts)", "µs"),
        (adds, "Redis CPU per link", "µs"),
        (mem, "Redis memory per seen URL", "bytes (used_memory)"),
    ):
        ax.set(xscale="log", xlabel="URLs seen", ylabel=unit, title=title)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    hosts = [h for h in result["hosts"] if "error" not in h]
    hosts_ax.plot([h["hosts"] for h in hosts], [h["redis_cpu_us_per_page"] for h in hosts], "o-")
    urls = result["config"].get("host_urls")
    per = f", {urls / 1e6:g} M URLs at each" if urls else ", 4 URLs per host"
    hosts_ax.set(
        xscale="log", xlabel="hosts", ylabel="µs", title=f"Redis CPU per page vs hosts{per}"
    )
    hosts_ax.set_ylim(bottom=0)
    for h in hosts:
        hosts_ax.annotate(
            f"{h['seeded_bytes_per_url']:.0f} B per seeded URL",
            (h["hosts"], h["redis_cpu_us_per_page"]),
            textcoords="offset points",
            xytext=(0, -14),
            ha="center",
            fontsize=7,
        )
    title = f"bench/frontier_growth.py at {result['commit'][:7]} ({result['date']})"
    if "seen_from" in result:
        seen = result["seen_from"]
        title += f"; URLs-seen axis at {seen['commit'][:7]} ({seen['date']})"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or "unknown"


def ratio(rows: list[dict[str, Any]], kind: str, key: str) -> float | None:
    mine = sorted((r for r in rows if r["filter"] == kind), key=lambda r: r["urls"])
    if len(mine) < 2 or not mine[0][key]:
        return None
    return round(mine[-1][key] / mine[0][key], 3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="1000000,10000000,100000000", help="URLs seen")
    p.add_argument("--hosts", default="1000,100000,1000000", help="hosts, per page runs")
    p.add_argument(
        "--host-urls", type=int, default=4_000_000, help="URLs seeded at every host count"
    )
    p.add_argument("--host-rounds", type=int, default=3, help="page runs per host count")
    p.add_argument("--rounds", type=int, default=5, help="per-add rounds over all sets")
    p.add_argument("--duration", type=float, default=15.0, help="seconds per page run")
    p.add_argument("--max-pages", type=int, default=40_000, help="per page run")
    p.add_argument("--filters", default="exact,bloom")
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--no-picture", action="store_true")
    p.add_argument("--redraw", action="store_true", help="only draw the PNG from the last JSON")
    p.add_argument(
        "--thp",
        action="store_true",
        help="Redis with transparent huge pages (writes frontier_growth-thp.json, no PNG)",
    )
    a = p.parse_args()
    if a.thp:
        THP["on"] = True
        os.environ["MALLOC_CONF"] = THP_MALLOC_CONF  # for the redis-servers started below
    if a.redraw:
        draw(json.loads((RESULTS / "frontier_growth.json").read_text()), PICTURE)
        print(f"wrote {PICTURE}")
        return
    sizes = [int(x) for x in a.sizes.split(",") if x]
    kinds = [k for k in a.filters.split(",") if k]
    started = time.perf_counter()
    load = os.getloadavg()
    grown: list[Grown] = []
    try:
        for n in sizes:
            for kind in kinds:
                print(f"loading {kind} {n:,} ...", flush=True)
                grown.append(grow(kind, n, a.seed + n))
                r = grown[-1].row
                print(
                    f"  {r['bytes_per_url']} B/URL, {r['keys']:,} keys, {r['load_s']} s", flush=True
                )
        smallest = min(sizes, default=0)
        lua = lua_filled(smallest, a.seed + smallest) if sizes and "exact" in kinds else None
        rng = random.Random(a.seed)
        for rnd in range(a.rounds if grown else 0):
            for g in grown:
                g.seen_us.append(measure_seen_tests(g, rng))
                g.add_us.append(measure_adds(g, rng))
            print(f"round {rnd + 1}/{a.rounds} done", flush=True)
        for g in grown:
            print(f"pages on {g.kind} {g.urls:,} ...", flush=True)
            page = page_run(g, a.duration, a.max_pages)
            g.row["seen_test_us"] = round(statistics.median(g.seen_us), 3)
            g.row["seen_test_us_rounds"] = [round(x, 3) for x in g.seen_us]
            g.row["add_us_per_link"] = round(statistics.median(g.add_us), 3)
            g.row["add_us_rounds"] = [round(x, 3) for x in g.add_us]
            g.row.update({k: page[k] for k in PAGE_KEYS})
            if g.kind == "exact" and g.urls == smallest and lua:
                g.row["lua_filled"] = lua
    finally:
        for g in grown:
            g.server.stop()
    seen_rows, seen_from = [g.row for g in grown], None
    last = RESULTS / ("frontier_growth-thp.json" if THP["on"] else "frontier_growth.json")
    if not sizes and last.exists():  # the hosts axis alone: the last seen axis stays
        before = json.loads(last.read_text())
        seen_rows = before["seen"]
        seen_from = before.get("seen_from") or {k: before[k] for k in ("date", "commit", "command")}
    result = summary(a, kinds, seen_rows, [], load, started)
    if sizes:
        write(result)  # the seen axis is kept if a hosts run fails
    counts = [int(x) for x in a.hosts.split(",") if x]
    hosts = hosts_axis(counts, a.host_urls, a.host_rounds, a.duration, a.max_pages)
    result = summary(a, kinds, seen_rows, hosts, load, started)
    if seen_from:
        result["seen_from"] = seen_from
    report(result)
    write(result)
    if not (a.no_picture or a.thp):
        draw(result, PICTURE)
        print(f"wrote {PICTURE}")


def summary(
    a: argparse.Namespace,
    kinds: list[str],
    seen_rows: list[dict[str, Any]],
    hosts: list[dict[str, Any]],
    load: tuple[float, float, float],
    started: float,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "frontier_growth",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "command": " ".join(["bench/frontier_growth.py", *sys.argv[1:]]),
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "wall_s": round(time.perf_counter() - started),
        "config": {
            "transparent_huge_pages": THP["on"],
            "shards": SHARDS,
            "rounds": a.rounds,
            "per_round": PER_ROUND,
            "add_batch": ADD_BATCH,
            "add_hosts": ADD_HOSTS,
            "page_duration_s": a.duration,
            "page_max_pages": a.max_pages,
            "host_urls": a.host_urls,
            "host_rounds": a.host_rounds,
        },
        "seen": seen_rows,
        "hosts": hosts,
        "ratios": {
            f"{kind}_{key}_largest_over_smallest": ratio(seen_rows, kind, key)
            for kind in kinds
            for key in ("add_us_per_link", "seen_test_us", "redis_cpu_us_per_page")
        },
        # Bytes per URL added between two sizes: no constant (scripts' state, meta) in it.
        "marginal_bytes_per_url": marginal(seen_rows),
    }
    done = [h for h in hosts if "error" not in h]
    if len(done) > 1:
        result["ratios"]["page_us_most_hosts_over_fewest"] = round(
            done[-1]["redis_cpu_us_per_page"] / done[0]["redis_cpu_us_per_page"], 3
        )
    return result


def marginal(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for kind in {r["filter"] for r in rows}:
        mine = sorted((r for r in rows if r["filter"] == kind), key=lambda r: r["urls"])
        for lo, hi in itertools.pairwise(mine):
            step = (hi["used_memory_bytes"] - lo["used_memory_bytes"]) / (hi["urls"] - lo["urls"])
            out[f"{kind}_{lo['urls']}_to_{hi['urls']}"] = round(step, 3)
    return out


def write(result: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    name = "frontier_growth-thp.json" if THP["on"] else "frontier_growth.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS / name}", flush=True)


def report(res: dict[str, Any]) -> None:
    print(
        f"\nfrontier growth, {res['config']['shards']} shards, load {res['load_average_at_start']}"
    )
    head = (
        f"{'filter':7} {'URLs':>12} {'B/URL':>7} {'seen test us':>13} {'add us/link':>12} "
        f"{'page us':>8} {'pages/s':>8}"
    )
    print(head + "\n" + "-" * len(head))
    for r in res["seen"]:
        print(
            f"{r['filter']:7} {r['urls']:>12,} {r['bytes_per_url']:>7.2f} "
            f"{r['seen_test_us']:>13.2f} "
            f"{r['add_us_per_link']:>12.2f} {r['redis_cpu_us_per_page']:>8.1f} "
            f"{r['pages_per_s']:>8,.0f}"
        )
    for h in res["hosts"]:
        if "error" in h:
            print(f"hosts {h['hosts']:>9,}: failed: {h['error']}")
            continue
        print(
            f"hosts {h['hosts']:>9,}: {h['redis_cpu_us_per_page']:.1f} us/page, "
            f"{h['pages_per_s']:,.0f} pages/s, {h['seeded_bytes_per_url']} B per seeded URL"
        )
    for k, v in res["ratios"].items():
        verdict = ""
        if "add_us_per_link" in k and v is not None:
            verdict = f"  (target <= {TARGET_RATIO}: {'met' if v <= TARGET_RATIO else 'NOT met'})"
        print(f"{k}: {v}{verdict}")


if __name__ == "__main__":
    main()
