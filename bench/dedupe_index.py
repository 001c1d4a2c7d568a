"""The duplicate index (crawlproject/dedupe): Redis CPU per page, memory per page.

    .venv/bin/python bench/dedupe_index.py                    # 1M and 10M pages
    .venv/bin/python bench/dedupe_index.py --sizes 100000 --sizes-without-originals "" \
        --calls 2000 --max-wait 0                            # quick
    .venv/bin/python bench/dedupe_index.py --redis cluster --masters 3

On a private redis-server (or a Redis Cluster of ``--masters`` masters started
here), the spread index (k=3, ``--parts`` parts) is filled with random pages: a
random SHA-1 and a random 64-bit SimHash each, and with record_originals a
60-byte URL. Filling goes straight to Redis, not through the scripts: the exact
commands the parts' buckets hold once that many new pages are in
(testkit/dedupe_spread_table.py), one SET a bucket, as RESP records built by
numpy, sent with CLIENT REPLY OFF. So the memory is the real thing. Lookups of
loaded pages (exact, and copies with 1-3 flipped bits) through DedupeIndex then
check the layout is the scripts'.

At each size: ``INFO used_memory`` after - before the fill, per page, and
``MEMORY USAGE`` (SAMPLES 0) of every key by kind (exact ``x:``, near ``s:``,
originals ``o:``); then ``--calls`` pages (half new random pages, half
near-duplicates of loaded ones, shuffled) in batches of ``--batch``, each
awaited: Redis CPU per page, per node, and the largest size's over the
smallest's. With originals (the default setting) at every size; then without
at ``--sizes-without-originals``, so originals' bytes per page are also
measured as a used_memory difference. Before starting, waits (up to
--max-wait s) for the machine's 1-minute load average to drop below 1.0.

The one-tag layout's rows (``--layouts growing``: one script run a page on one
hash tag) went with that layout in issue 42; their figures in BENCHMARKS.md
were measured by the releases that had it (git show 7bca5c2:bench/dedupe_index.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import redis as sync_redis
from benchlib import RedisServer, write_result
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from crawlproject.dedupe.fingerprint import FEATURES_VERSION
from crawlproject.dedupe.index import DedupeIndex, DedupeKind
from crawlproject.dedupe.layout import DEDUPE_LOAD, NEAR_MIN_LEVEL
from crawlproject.dedupe.spread import DEDUPE_PARTS, Spread
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.dedupe_spread_table import part_resp
from testkit.dedupe_table import command_head, records
from testkit.redis_cluster import cluster_port, redis_cli
from testkit.redis_server import RedisServer as PlainServer

CRAWL = "bench"
K = 3
QUIET_LOAD = 1.0
URL_BYTES = 60
VERIFY_PAGES = 300


def load_average() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def wait_until_quiet(max_wait_s: float, poll_s: float = 30.0) -> dict[str, Any]:
    start, seen = time.monotonic(), []
    while True:
        one = load_average()[0]
        seen.append(one)
        waited = time.monotonic() - start
        if one < QUIET_LOAD:
            return {"quiet": True, "waited_s": round(waited), "loads_seen": seen}
        if waited + poll_s > max_wait_s:
            return {"quiet": False, "waited_s": round(waited), "loads_seen": seen}
        print(f"load {one:.2f} >= {QUIET_LOAD}: waiting {poll_s:.0f} s", flush=True)
        time.sleep(poll_s)


# -- the pages ------------------------------------------------------------------------


class Pages:
    """Page i: digest bytes 1-10 ``digests[i]``, SimHash ``sims[i]``, URL ``url(i)``."""

    def __init__(self, n: int, seed: int = 1) -> None:
        rng = np.random.default_rng(seed)
        self.digests = rng.integers(0, 256, size=(n, 10), dtype=np.uint8)
        self.sims = np.frombuffer(rng.bytes(8 * n), dtype=">u8").astype(np.uint64)

    def __len__(self) -> int:
        return len(self.sims)

    @staticmethod
    def url(i: int) -> str:
        return f"https://www.h{i % 100_000:05d}.example.com/news/{i:012d}/index.shtml"

    def digest(self, i: int) -> bytes:
        return self.digests[i].tobytes() + bytes(10)  # the script reads bytes 1-10

    @staticmethod
    def url_rows(rows: np.ndarray) -> np.ndarray:
        """``url(i)`` for each i in rows, as (len(rows), URL_BYTES) uint8."""
        url0 = Pages.url(0).encode()
        assert len(url0) == URL_BYTES  # the originals' RESP declares this length
        host_at, page_at = url0.index(b"h00000") + 1, url0.index(b"000000000000")
        idx = rows.astype(np.uint64)
        out = np.empty((len(rows), len(url0)), dtype=np.uint8)
        out[:] = np.frombuffer(url0, dtype=np.uint8)
        out[:, host_at : host_at + 5] = _digits(idx % np.uint64(100_000), 5)
        out[:, page_at : page_at + 12] = _digits(idx, 12)
        return out


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.uint64)
    return ((values[:, None] // powers) % 10 + ord("0")).astype(np.uint8)


# -- checks and measurements ------------------------------------------------------------


def flip_bits(simhash: int, rng: random.Random, n: int) -> int:
    for b in rng.sample(range(64), n):
        simhash ^= 1 << b
    return simhash


async def verify_layout(url: str, keys: CrawlKeys, pages: Pages, hi: int, originals: bool) -> int:
    """Script lookups of loaded pages: their exact copies and 1-3-bit near copies."""
    rng = random.Random(hi)
    client = AsyncRedis.from_url(url)
    index = DedupeIndex(client, keys, k=K, record_originals=originals)
    await index.verify()  # takes the loaded layout
    checked = 0
    try:
        for i in rng.sample(range(hi), VERIFY_PAGES):
            sim, want_url = int(pages.sims[i]), Pages.url(i) if originals else None
            exact = await index.check_and_add(pages.digest(i), sim, "v", "verify")
            assert (exact.kind, exact.original) == (DedupeKind.EXACT, want_url), (i, exact)
            flips = rng.randint(1, 3)
            near = await index.check_and_add(
                rng.randbytes(20), flip_bits(sim, rng, flips), "v", "verify"
            )
            assert (near.kind, near.distance, near.original) == (
                DedupeKind.NEAR,
                flips,
                want_url,
            ), (i, near)
            checked += 2
        assert index.spread is not None
        layout = index.spread.spread
        await client.hdel(layout.streak_key(layout.host_part("verify")), "verify")
    finally:
        await client.aclose()
    return checked


def kind_of(key: str) -> str:
    tail = key.split("}:", 1)[1]
    return {"x": "exact", "s": "near", "o": "originals"}.get(tail.split(":", 1)[0], "other")


def memory_by_kind(srv: RedisServer, keys: CrawlKeys, pages: int) -> dict[str, Any]:
    usage = srv.usage_by_kind(f"cp:{{{keys.crawl}/dd*", kind_of)  # its parts
    return {
        kind: {"keys": n, "bytes": size, "bytes_per_page": round(size / pages, 2)}
        for kind, (n, size) in sorted(usage.items())
    }


def flush_and_wait(client: sync_redis.Redis) -> None:
    """FLUSHALL ASYNC, then wait until the server has freed it all: a plain
    FLUSHALL of a 10 M-page index outlasted the client's socket timeout on a
    loaded machine (TimeoutError), and used_memory is read right after."""
    client.flushall(asynchronous=True)
    while int(client.info("memory").get("lazyfree_pending_objects", 0)):
        time.sleep(0.1)


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    s = sorted(samples_ms)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {
        "p50": round(pick(0.50), 3),
        "p90": round(pick(0.90), 3),
        "p99": round(pick(0.99), 3),
        "max": round(s[-1], 3),
        "mean": round(statistics.fmean(s), 3),
    }


class Nodes:
    """The Redis the spread layout is measured on: one server (``single``), or
    a Redis Cluster of ``masters`` masters started here (redis-cli --cluster
    create, slots split evenly), each key's RESP sent to its slot's node."""

    def __init__(self, srv: RedisServer | None, masters: int) -> None:
        self.srv, self.servers = srv, []
        if srv is None:
            for _ in range(masters):
                node = PlainServer(extra_args=["--cluster-enabled", "yes",
                                               "--cluster-config-file", "nodes.conf"])  # fmt: skip
                node.port = cluster_port()
                self.servers.append(node.start())
            subprocess.run(
                [redis_cli(), "--cluster", "create",
                 *(f"127.0.0.1:{n.port}" for n in self.servers), "--cluster-yes"],
                check=True, capture_output=True, timeout=60,
            )  # fmt: skip
            self.clients = [sync_redis.Redis(port=n.port) for n in self.servers]
            deadline = time.monotonic() + 60
            while not all(c.cluster("info")["cluster_state"] == "ok" for c in self.clients):
                assert time.monotonic() < deadline, "cluster not ok"
                time.sleep(0.2)
        else:
            self.clients = [srv.client]
        self._slots: dict[int, int] = {}

    def node_of(self, key: str) -> int:
        if len(self.clients) == 1:
            return 0
        slot = int(self.clients[0].cluster("keyslot", key))
        if not self._slots:
            ports = {n.port: i for i, n in enumerate(self.servers)}
            for lo, hi, master, *_ in self.clients[0].execute_command("CLUSTER", "SLOTS"):
                for sl in range(int(lo), int(hi) + 1):
                    self._slots[sl] = ports[int(master[1])]
        return self._slots[slot]

    def client_for(self, key: str) -> sync_redis.Redis:
        return self.clients[self.node_of(key)]

    def async_client(self) -> Any:
        if self.srv is not None:
            return AsyncRedis.from_url(self.srv.url)
        return AsyncRedisCluster(host="127.0.0.1", port=self.servers[0].port)

    def flushall(self) -> None:
        for c in self.clients:
            flush_and_wait(c)

    def used_memory(self) -> int:
        return sum(int(c.info("memory")["used_memory"]) for c in self.clients)

    def cpu(self) -> list[float]:
        return [
            float(i["used_cpu_sys"]) + float(i["used_cpu_user"])
            for i in (c.info("cpu") for c in self.clients)
        ]

    def send(self, index: int, data: bytes) -> None:
        port = self.srv.port if self.srv is not None else self.servers[index].port
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"CLIENT REPLY OFF\r\n" + data + b"CLIENT REPLY ON\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                reply += sock.recv(64)
            assert reply == b"+OK\r\n", reply

    def stop(self) -> None:
        if self.srv is None:
            for c in self.clients:
                c.close()
            for n in self.servers:
                n.stop()


def fill_spread(
    nodes: Nodes, keys: CrawlKeys, pages: Pages, size: int, parts: int, originals: bool
) -> float:
    """Fills the spread layout with pages 0..size-1, each part's RESP sent to
    its node as it is made (the whole index's RESP at 100 M pages would not
    fit in memory beside the server's)."""
    t0 = time.perf_counter()
    spread = Spread(keys.crawl, K, 5, parts, DEDUPE_LOAD, NEAR_MIN_LEVEL)
    urls = Pages.url_rows if originals else None
    for prefix, resp in part_resp(
        spread, spread.signature(FEATURES_VERSION), pages.digests[:size], pages.sims[:size], urls
    ):
        nodes.send(nodes.node_of(prefix + "st"), resp)
    cfg = {"k": K, "fv": FEATURES_VERSION, "b": 5, "load": DEDUPE_LOAD, "nmin": NEAR_MIN_LEVEL,
           "parts": parts}  # fmt: skip
    nodes.client_for(keys.dedupe_config).hset(keys.dedupe_config, mapping=cfg)
    nodes.client_for(spread.counters_key(0)).hincrby(spread.counters_key(0), "new", size)
    return time.perf_counter() - t0


async def measure_spread(
    nodes: Nodes, keys: CrawlKeys, pages: Pages, hi: int, calls: int, batch: int,
    originals: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """``calls`` pages (half new, half 1-3-bit near copies) in batches of
    ``batch``, each awaited; Redis CPU per page per node. Its own seed (the
    one-tag rows' replayed here were exact copies: half the verdicts wrong)."""
    rng = random.Random(f"batched {calls} {hi}")
    plan: list[tuple[str, bytes, int, int]] = []
    for _ in range(calls // 2):
        plan.append(("new", rng.randbytes(20), rng.getrandbits(64), 0))
        i, flips = rng.randrange(hi), rng.randint(1, 3)
        plan.append(("near", rng.randbytes(20), flip_bits(int(pages.sims[i]), rng, flips), flips))
    rng.shuffle(plan)
    client = nodes.async_client()
    index = DedupeIndex(client, keys, k=K, record_originals=originals)
    url = "https://www.h12345.example.com/news/000000000000/index.shtml"
    wrong, times = 0, []
    try:
        await index.verify()
        for _ in range(10):
            await index.check_and_add_many(
                [(rng.randbytes(20), rng.getrandbits(64), url, "warmup") for _ in range(batch)]
            )
        cpu0 = nodes.cpu()
        t_start = time.perf_counter()
        for start in range(0, len(plan), batch):
            chunk = plan[start : start + batch]
            t0 = time.perf_counter_ns()
            got = await index.check_and_add_many(
                [(d, s, url, f"http://h{(start + n) % 1000}.example.com")
                 for n, (_, d, s, _) in enumerate(chunk)]
            )  # fmt: skip
            times.append((time.perf_counter_ns() - t0) / 1e6)
            for v, (kind, _, _, flips) in zip(got, chunk, strict=True):
                if v.kind != kind or (kind == "near" and v.distance != flips):
                    wrong += 1
        wall = time.perf_counter() - t_start
        cpu = [b - a for a, b in zip(cpu0, nodes.cpu(), strict=True)]
    finally:
        await client.aclose()
    per_node = [round(c / len(plan) * 1e6, 1) for c in cpu]
    mean = sum(cpu) / len(cpu)
    return {
        "calls": len(plan),
        "batch": batch,
        "batch_ms": percentiles(times),
        "pages_per_s": round(len(plan) / wall),
        "server_cpu_usec_per_call": round(sum(cpu) / len(plan) * 1e6, 1),
        "server_cpu_usec_per_page_per_node": per_node,
        "busiest_node_share": round(max(cpu) / sum(cpu), 3) if sum(cpu) else 0.0,
        "busiest_node_over_mean": round(max(cpu) / mean, 3) if mean else 0.0,
        "unexpected_verdicts": wrong,
    }


def fill_ballast(nodes: Nodes, count: int, value_bytes: int) -> int:
    """``count`` keys ``bl:<12 digits>`` of ``value_bytes`` each, never read again: a
    server as large as a bigger index, its dict as long, while the index measured
    stays small (is a bigger index's cost per page its own, or the server's size?).
    Returns used_memory after."""
    value = b"v" * value_bytes
    for lo in range(0, count, 250_000):
        idx = np.arange(lo, min(count, lo + 250_000), dtype=np.uint64)
        head = command_head("SET", 2) + b"$15\r\nbl:"
        tail = f"\r\n${value_bytes}\r\n".encode() + value + b"\r\n"
        nodes.send(0, records(len(idx), [head, _digits(idx, 12), tail]))
    return nodes.used_memory()


def spread_runs(
    nodes: Nodes, keys: CrawlKeys, pages: Pages, sizes: list[int], calls: int, batch: int,
    parts: int, originals: bool = True, key_sizes: bool = True, ballast: tuple[int, int] = (0, 0),
) -> list[dict[str, Any]]:  # fmt: skip
    rows = []
    for size in sizes:
        print(
            f"  spread ({parts} parts), {size:,} pages on {len(nodes.clients)} node(s), "
            f"originals {'on' if originals else 'off'} ...",
            flush=True,
        )
        nodes.flushall()
        if ballast[0]:
            print(f"  ballast: {ballast[0]:,} keys of {ballast[1]} B ...", flush=True)
            ballast_memory = fill_ballast(nodes, *ballast)
        base = nodes.used_memory()
        load_s = fill_spread(nodes, keys, pages, size, parts, originals)
        mem = nodes.used_memory() - base
        row: dict[str, Any] = {
            "layout": "spread",
            "parts": parts,
            "nodes": len(nodes.clients),
            "pages": size,
            "record_originals": originals,
            "load_s": round(load_s, 1),
            "used_memory_delta": mem,
            "used_memory_per_page": round(mem / size, 2),
        }
        if ballast[0]:
            row["ballast"] = {"keys": ballast[0], "value_bytes": ballast[1],
                              "used_memory": ballast_memory}  # fmt: skip
        if nodes.srv is not None:
            row["layout_checks"] = asyncio.run(
                verify_layout(nodes.srv.url, keys, pages, size, originals)
            )
            if key_sizes:  # MEMORY USAGE of every key: ~15 min at 100 M pages
                row["by_kind"] = memory_by_kind(nodes.srv, keys, size)
        row["latency"] = asyncio.run(
            measure_spread(nodes, keys, pages, size, calls, batch, originals)
        )
        print(f"  -> {json.dumps(row['latency'])}", flush=True)
        rows.append(row)
    return rows


def spread_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per size: the spread layout's Redis CPU per page (all nodes), per node,
    the busiest node's share; and the largest size over the smallest. Rows without
    originals are keyed ``<pages> without originals``, their ratio
    ``largest_over_smallest_without_originals``."""
    out: dict[str, Any] = {}
    for originals in (True, False):
        spread = sorted(
            (r for r in runs if r["layout"] == "spread" and r["record_originals"] == originals),
            key=lambda r: int(r["pages"]),
        )
        tail = "" if originals else " without originals"
        for r in spread:
            lat = r["latency"]
            row = {
                "nodes": r["nodes"],
                "cpu_usec_per_page": lat["server_cpu_usec_per_call"],
                "cpu_usec_per_page_per_node": lat["server_cpu_usec_per_page_per_node"],
                "busiest_node_share": lat["busiest_node_share"],
                "busiest_node_over_mean": lat["busiest_node_over_mean"],
                "used_memory_per_page": r["used_memory_per_page"],
            }
            out[f"{r['pages']}{tail}"] = row
        if len(spread) > 1:
            cpu = [r["latency"]["server_cpu_usec_per_call"] for r in (spread[0], spread[-1])]
            out[f"largest_over_smallest{tail.replace(' ', '_')}"] = (
                round(cpu[1] / cpu[0], 3) if cpu[0] else 0.0
            )
    return out


def originals_by_difference(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Pages -> used_memory per page with originals minus without, at each size run both ways."""
    out = {}
    for on in runs:
        for off in runs:
            # Sizes differ by the pages the latency calls added (~0.1%).
            both = on["record_originals"] and not off["record_originals"]
            both = both and on["layout"] == off["layout"]
            if both and abs(on["pages"] - off["pages"]) < 0.01 * on["pages"]:
                out[str(on["pages"])] = round(
                    on["used_memory_per_page"] - off["used_memory_per_page"], 2
                )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="1000000,10000000", help="index sizes, ascending")
    p.add_argument(
        "--sizes-without-originals",
        default="1000000,10000000",
        help="index sizes filled again without originals (empty: none)",
    )
    p.add_argument("--calls", type=int, default=20_000, help="single calls measured per size")
    p.add_argument("--max-wait", type=float, default=600, help="s to wait for a quiet machine")
    p.add_argument(
        "--redis", choices=("single", "cluster"), default="single",
        help="single: one server; cluster: a Redis Cluster of --masters masters",
    )  # fmt: skip
    p.add_argument("--masters", type=int, default=3, help="masters of the --redis cluster")
    p.add_argument("--batch", type=int, default=32, help="pages a round trip (spread rows)")
    p.add_argument("--parts", type=int, default=DEDUPE_PARTS, help="the spread layout's parts")
    p.add_argument(
        "--no-key-sizes", action="store_true",
        help="on one server: no MEMORY USAGE of every key (used_memory only)",
    )  # fmt: skip
    p.add_argument(
        "--ballast", default="0:0", metavar="KEYS:BYTES",
        help="on one server: first KEYS keys of BYTES each, never read (the "
        "server's size without the index's)",
    )  # fmt: skip
    p.add_argument("--out", default="dedupe_index.json", help="file name under bench/results")
    a = p.parse_args()
    sizes = sorted(int(s) for s in a.sizes.split(",") if s)
    sizes_off = sorted(int(s) for s in a.sizes_without_originals.split(",") if s)
    ballast_keys, ballast_bytes = (int(v) for v in a.ballast.split(":"))
    if ballast_keys and a.redis != "single":
        p.error("--ballast is for one server")
    keys = CrawlKeys(CRAWL, 1)
    t0 = time.perf_counter()
    pages = Pages(max(sizes + sizes_off))
    print(f"{len(pages):,} random pages made in {time.perf_counter() - t0:.1f} s", flush=True)
    quiet = wait_until_quiet(a.max_wait)
    print(f"load average before: {load_average()} ({quiet})", flush=True)
    srv = RedisServer()
    runs = []
    try:
        info = srv.versions(numpy=np.__version__)
        if a.redis == "cluster":
            srv.stop()
            nodes = Nodes(None, a.masters)
            try:
                runs += spread_runs(nodes, keys, pages, sizes, a.calls, a.batch, a.parts)
                runs += spread_runs(
                    nodes, keys, pages, sizes_off, a.calls, a.batch, a.parts, originals=False
                )
            finally:
                nodes.stop()
        else:
            one = Nodes(srv, 1)
            sizes_of = not a.no_key_sizes
            ballast = (ballast_keys, ballast_bytes)
            runs += spread_runs(one, keys, pages, sizes, a.calls, a.batch, a.parts,
                                key_sizes=sizes_of, ballast=ballast)  # fmt: skip
            runs += spread_runs(one, keys, pages, sizes_off, a.calls, a.batch, a.parts,
                                False, sizes_of, ballast)  # fmt: skip
    finally:
        if a.redis == "single":
            srv.stop()
    result = {
        "benchmark": "dedupe_index",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([".venv/bin/python", "bench/dedupe_index.py", *sys.argv[1:]]),
        "machine": {**info, "quiet_wait": quiet, "loadavg_at_end": load_average()},
        "config": {
            "k": K,
            "calls": a.calls,
            "sizes": sizes,
            "sizes_without_originals": sizes_off,
            "url_bytes": URL_BYTES,
            "parts": a.parts,
            "batch": a.batch,
            "ballast": {"keys": ballast_keys, "value_bytes": ballast_bytes},
        },
        "runs": runs,
        "originals_bytes_per_page_by_used_memory": originals_by_difference(runs),
        "spread": spread_summary(runs),
    }
    report(result)
    print(f"\nwrote {write_result(a.out, result)}")


def report(res: dict[str, Any]) -> None:
    m = res["machine"]
    print(
        f"\nDuplicate index, k={res['config']['k']}, redis {m['redis_server']}, "
        f"{res['config']['calls']:,} pages per row in batches of {res['config']['batch']} "
        f"(half new, half 1-3-bit near copies); load avg before "
        f"{m['quiet_wait']['loads_seen'][-1]:.2f}"
    )
    print(f"spread layout: {json.dumps(res['spread'])}")
    print(
        "originals, used_memory with minus without (pages: B/page): "
        f"{res['originals_bytes_per_page_by_used_memory']}"
    )
    print(f"command: {res['command']}")


if __name__ == "__main__":
    main()
