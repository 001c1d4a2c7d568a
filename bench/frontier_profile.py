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

With ``--callgrind`` the redis-server runs under valgrind's callgrind,
instrumented only while each phase runs, and each script's figure is the
number of instructions Redis executes per page: slow (a few thousand pages),
but the same at any load, so that two revisions compare on a shared machine
(run the other one's export with ``FRONTIER_OPS_CODE=<export>``, as
frontier_ops.py's --revs does).

Results: bench/results/frontier_profile.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis
from benchlib import RedisServer, ensure_valgrind, result_record, write_result
from frontier_ops import (
    POLICY_MODES,
    REV_CODE_ENV,
    Config,
    Links,
    Picker,
    UrlSpace,
    _frontier,
    pool_size,
    pooled,
    seed,
)

from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.redis_frontier import NewEntry, Release
from testkit.processes import free_port

RESULTS = Path(__file__).resolve().parent / "results"
PHASES = ("claim", "release", "add", "ack")
# benchlib sets TEST_REDIS_SERVER to Debian's when it is there; another (say,
# one built with symbols, for callgrind_annotate) may be named instead.
REDIS_SERVER = os.environ.get("TEST_REDIS_SERVER", "redis-server")


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


class CallgrindRedis:
    """A redis-server under callgrind, instrumented only between start() and
    stop(phase); stop() dumps the counts under the phase's name."""

    def __init__(self, workdir: Path) -> None:
        # One directory per run: two runs at once (helpers share a tree) must
        # not delete or count each other's dumps.
        self.dir = workdir / str(os.getpid())
        self.dir.mkdir(parents=True, exist_ok=True)
        for old in self.dir.glob("cg.out.*"):
            old.unlink()
        ensure_valgrind()
        port = free_port()
        self.url = f"redis://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [
                "valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={self.dir}/cg.out.%p",
                REDIS_SERVER, "--port", str(port), "--save", "", "--appendonly", "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.client = redis.Redis(port=port, socket_timeout=600)
        for _ in range(600):
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.2)

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(self.proc.pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )

    def start(self) -> None:
        self._ctl("-i", "on")

    def stop(self, phase: str) -> None:
        self._ctl("-i", "off")
        self._ctl("-d", phase)

    def flushall(self) -> None:
        self.client.flushall()

    def instructions(self) -> dict[str, int]:
        """Phase -> instructions executed in it, over every dump."""
        out: dict[str, int] = defaultdict(int)
        for path in self.dir.glob("cg.out.*"):
            text = path.read_text(errors="replace").splitlines()
            trigger = next((ln for ln in text if ln.startswith("desc: Trigger:")), "")
            totals = next((ln for ln in text if ln.startswith("totals:")), "")
            if trigger and totals and trigger.split()[-1] in PHASES:
                out[trigger.split()[-1]] += int(totals.split()[1])
        return dict(out)

    def stop_server(self) -> None:
        with contextlib.suppress(redis.RedisError):  # it closes the connection
            self.client.shutdown(nosave=True)
        self.proc.wait(timeout=600)


async def page_loop(
    system: str,
    cfg: Config,
    pages_wanted: int,
    before: Callable[[], None],
    after: Callable[[str], None],
) -> int:
    """The frontier_ops driver's page loop (claim, release, a page's links, ack) with
    ``before()`` and ``after(phase)`` around each phase's calls; the pages done."""
    r = redis_client(cfg.url)
    f = _frontier(r, cfg, system)
    await f.prepare()
    links, pick = Links(UrlSpace(cfg.hosts, 1), False), Picker(cfg.seen_fraction, 1)
    entry = pooled(links.ours, pool_size(replace(cfg, max_pages=pages_wanted), False))
    pages = 0
    while pages < pages_wanted:
        before()
        items: list[tuple[Any, bytes]] = []
        shares: list[float | None] = []
        for shard in range(cfg.shards):
            batch = await f.claim(shard, cfg.claim_n, "profile")
            items += batch.items
            shares += batch.shares or [None] * len(batch.items)
        after("claim")
        if not items:
            continue
        leases = [lease for lease, _ in items]
        before()
        await f.release([Release(lease, 0) for lease in leases])
        after("release")
        entries = links_of(entry, pick, shares, cfg, len(items))
        before()
        await f.add(entries)
        after("add")
        before()
        await f.ack(leases)
        after("ack")
        pages += len(items)
    await r.aclose()
    return pages


async def count_instructions(
    server: CallgrindRedis, system: str, cfg: Config, pages_wanted: int
) -> dict[str, Any]:
    """The page loop with each phase instrumented on its own."""
    pages = await page_loop(system, cfg, pages_wanted, server.start, server.stop)
    counts = server.instructions()
    per_page = {phase: round(counts.get(phase, 0) / pages) for phase in PHASES}
    return {
        "system": system,
        "hosts": cfg.hosts,
        "pages": pages,
        "instructions_per_page": per_page,
        "total_instructions_per_page": sum(per_page.values()),
    }


def links_of(
    entry: Any, pick: Picker, shares: list[float | None], cfg: Config, pages: int
) -> list[NewEntry]:
    """A page's links as the frontier_ops driver makes them (AOPIC: its share each)."""
    if any(share is not None for share in shares):
        return [
            NewEntry(e.pkey, e.fingerprint, e.dont_filter, e.data, (share or 0.0) / cfg.links)
            for share in shares
            for e in (entry(pick()) for _ in range(cfg.links))
        ]
    return [entry(pick()) for _ in range(cfg.links * pages)]


async def profile(
    server: RedisServer, system: str, cfg: Config, pages_wanted: int
) -> dict[str, Any]:
    stats: dict[str, dict[str, list[int]]] = {p: defaultdict(lambda: [0, 0]) for p in PHASES}
    client = server.client
    last: list[dict[str, tuple[int, int]]] = []

    def before() -> None:
        last[:] = [commandstats(client)]

    def after(phase: str) -> None:
        for name, (calls, usec) in delta(last[0], commandstats(client)).items():
            stats[phase][name][0] += calls
            stats[phase][name][1] += usec

    cpu0 = server.cpu_seconds()
    pages = await page_loop(system, cfg, pages_wanted, before, after)
    cpu1 = server.cpu_seconds()
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


def config(a: argparse.Namespace, url: str) -> Config:
    return Config(
        a.hosts,
        a.seeds_per_host,
        64,
        20,
        a.seen_fraction,
        3600.0,
        a.pages,
        NEW_CRAWL_SHARDS,
        url=url,
    )


def report_instructions(rows: list[dict[str, Any]], a: argparse.Namespace) -> None:
    for row in rows:
        parts = ", ".join(f"{k} {v / 1000:,.0f}k" for k, v in row["instructions_per_page"].items())
        print(
            f"{row['system']}, {row['hosts']:,} hosts, {row['pages']:,} pages: "
            f"{row['total_instructions_per_page'] / 1000:,.0f}k Redis instructions per page "
            f"({parts})"
        )
    result = result_record(
        "frontier_profile --callgrind",
        code=os.environ.get(REV_CODE_ENV) or "this checkout",
        results=rows,
    )
    print(f"wrote {write_result('frontier_instructions.json', result)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--systems", default="ours,ours-aopic")
    p.add_argument("--pages", type=int, default=20_000)
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--seeds-per-host", type=int, default=4)
    p.add_argument(
        "--seen-fraction", type=float, default=0.5, help="of the links, those seen before"
    )
    p.add_argument(
        "--callgrind", action="store_true", help="count Redis's instructions per phase instead"
    )
    a = p.parse_args()
    if any(system not in POLICY_MODES for system in a.systems.split(",")):
        p.error(f"--systems: {', '.join(POLICY_MODES)}")
    rows = []
    if a.callgrind:
        info: dict[str, object] = {
            "redis_server": f"{REDIS_SERVER} under valgrind --tool=callgrind"
        }
        for system in a.systems.split(","):
            cg = CallgrindRedis(RESULTS / "callgrind")
            try:
                cfg = config(a, cg.url)
                seed(cg, system, cfg)  # type: ignore[arg-type]
                rows.append(asyncio.run(count_instructions(cg, system, cfg, a.pages)))
            finally:
                cg.stop_server()
        report_instructions(rows, a)
        return
    srv = RedisServer()
    try:
        info = srv.versions()
        for system in a.systems.split(","):
            cfg = config(a, srv.url)
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
    result = result_record("frontier_profile", machine=info, results=rows)
    print(f"\nwrote {write_result('frontier_profile.json', result)}")


if __name__ == "__main__":
    main()
