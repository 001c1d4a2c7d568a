"""Where the frontier's Redis CPU goes: per script and per Redis command.

    .venv/bin/python bench/frontier_profile.py [--systems ours,ours-aopic]
        [--pages 20000] [--hosts 1000]

bench/frontier_ops.py's frontier-mode page loop (claim on every shard, release,
20 links per page about half already seen, ack; host delay 0), one driver in
this process against a private redis-server, with ``INFO commandstats`` read
between the phases: for each script (claim, release, add, ack) the Redis time
of its EVALSHA calls per page (µs) and, per page, how many times it ran each
command from Lua and their own time. The INFO calls are left out of every
figure (they go between phases). Redis counts its own time in commandstats,
so the per-script µs are comparable in one run but move with the machine's
load; the calls per page do not.

Results: bench/results/frontier_profile.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from benchlib import RedisServer
from frontier_ops import (
    POLICY_MODES,
    Config,
    Links,
    Picker,
    UrlSpace,
    _frontier,
    pool_size,
    pooled,
    seed,
)

from crawlproject import default_settings as ds
from crawlproject.frontier.client import NewEntry, Release
from crawlproject.frontier.connection import redis_client

RESULTS = Path(__file__).resolve().parent / "results"
PHASES = ("claim", "release", "add", "ack")


def commandstats(client: redis.Redis) -> dict[str, tuple[int, int]]:
    return {
        k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for k, v in client.info("commandstats").items()
    }


def delta(a: dict[str, tuple[int, int]], b: dict[str, tuple[int, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name, (calls, usec) in b.items():
        c0, u0 = a.get(name, (0, 0))
        if calls > c0 and name not in ("info",):
            out[name] = [calls - c0, usec - u0]
    return out


async def profile(
    server: RedisServer, system: str, cfg: Config, pages_wanted: int
) -> dict[str, Any]:
    r = redis_client(cfg.url)
    f = _frontier(r, cfg, system)
    await f.prepare()
    links, pick = Links(UrlSpace(cfg.hosts, 1), False), Picker(cfg.seen_fraction, 1)
    entry = pooled(links.ours, pool_size(replace(cfg, max_pages=pages_wanted), False))
    stats: dict[str, dict[str, list[int]]] = {p: defaultdict(lambda: [0, 0]) for p in PHASES}
    client = server.client
    pages = 0
    cpu0 = server.cpu_seconds()
    while pages < pages_wanted:
        s0 = commandstats(client)
        items: list[tuple[Any, bytes]] = []
        shares: list[float | None] = []
        for shard in range(cfg.shards):
            batch = await f.claim(shard, cfg.claim_n, "profile")
            items += batch.items
            shares += batch.shares or [None] * len(batch.items)
        s1 = commandstats(client)
        if not items:
            continue
        leases = [lease for lease, _ in items]
        await f.release([Release(lease, 0) for lease in leases])
        s2 = commandstats(client)
        if any(share is not None for share in shares):
            entries = [
                NewEntry(e.pkey, e.fingerprint, e.dont_filter, e.data, (share or 0.0) / cfg.links)
                for share in shares
                for e in (entry(pick()) for _ in range(cfg.links))
            ]
        else:
            entries = [entry(pick()) for _ in range(cfg.links * len(items))]
        s3 = commandstats(client)
        await f.add(entries)
        s4 = commandstats(client)
        await f.ack(leases)
        s5 = commandstats(client)
        for phase, a, b in (
            ("claim", s0, s1),
            ("release", s1, s2),
            ("add", s3, s4),
            ("ack", s4, s5),
        ):
            for name, (calls, usec) in delta(a, b).items():
                stats[phase][name][0] += calls
                stats[phase][name][1] += usec
        pages += len(items)
    cpu1 = server.cpu_seconds()
    await r.aclose()
    out: dict[str, Any] = {"system": system, "hosts": cfg.hosts, "pages": pages, "scripts": {}}
    for phase in PHASES:
        cmds = stats[phase]
        script_us = sum(v[1] for k, v in cmds.items() if k in ("evalsha", "eval"))
        inner = {k: v for k, v in cmds.items() if k not in ("evalsha", "eval", "script|load")}
        out["scripts"][phase] = {
            "redis_us_per_page": round(script_us / pages, 1),
            "calls_per_page": round(sum(v[0] for v in inner.values()) / pages, 2),
            "by_command": {
                k: {"calls_per_page": round(v[0] / pages, 2), "us_per_page": round(v[1] / pages, 2)}
                for k, v in sorted(inner.items(), key=lambda kv: -kv[1][1])
            },
        }
    out["scripts_us_per_page"] = round(
        sum(s["redis_us_per_page"] for s in out["scripts"].values()), 1
    )
    # Whole server, INFO calls included: an upper bound.
    out["redis_cpu_us_per_page_with_info"] = round((cpu1 - cpu0) / pages * 1e6, 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--systems", default="ours,ours-aopic")
    p.add_argument("--pages", type=int, default=20_000)
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--seeds-per-host", type=int, default=4)
    a = p.parse_args()
    rows = []
    srv = RedisServer()
    try:
        info = srv.versions()
        for system in a.systems.split(","):
            if system not in POLICY_MODES:
                p.error(f"--systems: {', '.join(POLICY_MODES)}")
            cfg = Config(
                a.hosts, a.seeds_per_host, 64, 20, 0.5, 3600.0, a.pages,
                ds.CRAWL_FRONTIER_SHARDS, url=srv.url,
            )  # fmt: skip
            seed(srv, system, cfg)  # frontier_ops's seeding (its own event loop)
            rows.append(asyncio.run(profile(srv, system, cfg, a.pages)))
    finally:
        srv.stop()
    for row in rows:
        print(
            f"\n{row['system']}, {row['hosts']:,} hosts, {row['pages']:,} pages: scripts "
            f"{row['scripts_us_per_page']} us/page of Redis time"
        )
        for phase, s in row["scripts"].items():
            top = ", ".join(
                f"{k} {v['calls_per_page']}x {v['us_per_page']}us"
                for k, v in list(s["by_command"].items())[:8]
            )
            print(
                f"  {phase:8} {s['redis_us_per_page']:7.1f} us/page, "
                f"{s['calls_per_page']:5.1f} calls/page: {top}"
            )
    RESULTS.mkdir(exist_ok=True)
    result = {
        "benchmark": "frontier_profile",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["bench/frontier_profile.py", *sys.argv[1:]]),
        "machine": info,
        "results": rows,
    }
    (RESULTS / "frontier_profile.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {RESULTS / 'frontier_profile.json'}")


if __name__ == "__main__":
    main()
