"""``bench/crawl_rate.py --part address``: what politeness per server costs and
gives (docs/frontier.md, "Politeness per server").

A. Where the cap does not bind: the delay-bound crawl of part A (100 hosts x
   30 pages, latency 10-80 ms, CRAWL_HOST_DELAY=1.0, 4 workers), every host on
   its own loopback address, with the address cap on (CRAWL_ADDRESS_CONCURRENCY
   = 4, the default) and off (0), rounds alternating (on off, off on, ...):
   pages/s of each and their ratio, same run.
B. Where it binds: 200 host names on 10 loopback addresses (testkit/named_web.py,
   the crawl maps the names there with CRAWL_HOST_ADDRESSES), 20 pages each,
   latency 400-600 ms, delay 1 s, 4 workers, cap 4. The ideal is the smaller of
   what the caps allow: addresses x cap / mean latency (10 x 4 / 0.5 s = 80
   pages/s), and the hosts' own rate, sum of 1 / (delay + latency) (133). The
   adaptive delay is off here (CRAWL_ADAPTIVE_DELAY_FACTOR=0): at 5 x 0.5 s it
   would make the hosts' delay bind before the addresses do. Politeness is
   judged from the server's log: requests in flight per address and per host,
   end-to-start idle per host.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections import Counter
from typing import Any

import crawl_rate as cr

from testkit.crawlproc import start_worker, stats_of, tail
from testkit.named_web import NamedWeb, min_idle, peak_in_flight
from testkit.redis_server import RedisServer

CAP = 4


def spread_config(quick: bool) -> dict[str, Any]:
    sizes = (
        dict(hosts=40, addresses=4, pages=5) if quick else dict(hosts=200, addresses=10, pages=20)
    )
    return {**sizes, "latency_s": (0.4, 0.6), "delay": 1.0, "workers": 2 if quick else 4,
            "cap": CAP, "concurrency": 32, "idle_close": 2.0}  # fmt: skip


def part_address(args: argparse.Namespace, out: dict[str, Any]) -> None:
    section: dict[str, Any] = {}
    out["address"] = section
    cap_cost(args, out, section)
    cap_binding(args, out, section)
    print_address(section)


# -- A: the cap where it does not bind ---------------------------------------------------


def cap_cost(args: argparse.Namespace, out: dict[str, Any], section: dict[str, Any]) -> None:
    cfg = cr.delay_config(args.quick)
    workers = cfg["frontier_workers"][-1]
    base = {
        "CRAWL_HOST_DELAY": cfg["delay"],
        "CRAWL_IDLE_CLOSE_SECONDS": cfg["idle_close"],
        "CONCURRENT_REQUESTS": cfg["frontier_concurrency"],
        "LOG_LEVEL": "INFO",
    }
    runs: list[dict[str, Any]] = []
    section["cap_cost"] = {"config": {**cfg, "workers": workers}, "runs": runs}
    for i in range(args.address_repeats):
        order = [("on", CAP), ("off", 0)]
        for side, cap in order if i % 2 == 0 else order[::-1]:
            name = f"address-{side}-{workers}w-{i + 1}"
            print(f"[address] {name} ...", flush=True)
            settings = {**base, "CRAWL_ADDRESS_CONCURRENCY": cap}
            res, run = cr.delay_run(cfg, name, "frontier", workers, settings)
            stats = run["worker_stats"]
            res.update(
                side=side,
                round=i + 1,
                address_denied=sum(s.get("frontier/address_denied", 0) for s in stats),
                address_taken=sum(s.get("frontier/address_taken", 0) for s in stats),
            )
            runs.append(res)
            cr.save(out, args)
    medians = {
        side: {
            key: statistics.median(r[key] for r in runs if r["side"] == side)
            for key in ("pages_per_s", "steady_pages_per_s")
        }
        for side in ("on", "off")
    }
    section["cap_cost"]["median"] = medians
    section["cap_cost"]["on_vs_off"] = {
        key: medians["on"][key] / medians["off"][key] for key in medians["on"]
    }
    section["cap_cost"]["round_ratios"] = [
        next(r for r in runs if (r["round"], r["side"]) == (i, "on"))["pages_per_s"]
        / next(r for r in runs if (r["round"], r["side"]) == (i, "off"))["pages_per_s"]
        for i in range(1, args.address_repeats + 1)
    ]
    cr.save(out, args)


# -- B: many names on a few addresses ----------------------------------------------------


def cap_binding(args: argparse.Namespace, out: dict[str, Any], section: dict[str, Any]) -> None:
    cfg = spread_config(args.quick)
    runs: list[dict[str, Any]] = []
    section["cap_binding"] = {"config": cfg, "runs": runs}
    for i in range(args.address_spread_repeats):
        name = f"spread-{cfg['hosts']}h-{cfg['addresses']}a-{i + 1}"
        print(f"[address] {name} ...", flush=True)
        runs.append(spread_run(cfg, name))
        cr.save(out, args)


def spread_run(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    workdir = cr.RESULTS / "crawl_rate" / "address" / name
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    addresses = [f"127.0.{20 + a // 250}.{1 + a % 250}" for a in range(cfg["addresses"])]
    sites = {f"site{i:03d}.test": cfg["pages"] for i in range(cfg["hosts"])}
    web = NamedWeb(sites, addresses, latency=cfg["latency_s"], seed=3).start()
    settings = {
        "CRAWL_HOST_DELAY": cfg["delay"],
        "CRAWL_ADAPTIVE_DELAY_FACTOR": 0,
        "CRAWL_ADDRESS_CONCURRENCY": cfg["cap"],
        "CRAWL_HOST_ADDRESSES": web.host_addresses(),
        "CRAWL_IDLE_CLOSE_SECONDS": cfg["idle_close"],
        "CONCURRENT_REQUESTS": cfg["concurrency"],
        "LOG_LEVEL": "INFO",
        **cr.EXTRA_SETTINGS,
    }
    cr.worker_pythonpath(cr.CODE_ROOT)
    try:
        with RedisServer() as redis_server:
            launched = time.time()
            procs = [
                start_worker(cr.CODE_ROOT, redis_server.url, "bench", web.seeds(), settings,
                             workdir / f"worker-{i}.log")
                for i in range(cfg["workers"])
            ]  # fmt: skip
            codes, cpu, _, _ = cr.wait_with_rusage(procs, timeout=900)
            wall = time.time() - launched
    finally:
        web.stop()
    if any(codes):
        logs = "\n".join(f"--- {p.log_path}\n{tail(p.log_path)}" for p in procs)
        raise RuntimeError(f"{name}: worker exit codes {codes}\n{logs}")
    return analyse_spread(cfg, name, web, [stats_of(p.log_path) for p in procs], cpu, wall)


def analyse_spread(
    cfg: dict[str, Any],
    name: str,
    web: NamedWeb,
    stats: list[dict[str, int]],
    cpu: list[float],
    wall: float,
) -> dict[str, Any]:
    pages = [h for h in web.log if h.path != "/robots.txt"]
    n = len(pages)
    first, last = min(h.start for h in pages), max(h.end for h in pages)
    starts = sorted(h.start for h in pages)
    lo, hi = int(0.1 * n), int(0.9 * n)
    steady = (hi - lo) / (starts[hi] - starts[lo])
    # The requests' own latency, as served (robots.txt ones included: they hold places too).
    mean_latency = statistics.fmean(h.end - h.start for h in web.log)
    address_bound = cfg["addresses"] * cfg["cap"] / mean_latency
    host_bound = cfg["hosts"] / (cfg["delay"] + mean_latency)
    ideal = min(address_bound, host_bound)
    fetched = Counter((h.name, h.path) for h in pages)
    per_address = peak_in_flight(web.log, key=lambda h: h.address)
    per_host = peak_in_flight(web.log, key=lambda h: h.name)
    idle = min_idle(web.log, key=lambda h: h.name)
    return {
        "name": name,
        "pages": n,
        "duration_s": last - first,
        "pages_per_s": n / (last - first),
        "steady_pages_per_s": steady,
        "ideal": {
            "mean_latency_s": mean_latency,
            "address_bound": address_bound,
            "host_bound": host_bound,
            "binds": "address" if address_bound <= host_bound else "host",
            "pages_per_s": ideal,
        },
        "pages_per_s_vs_ideal": n / (last - first) / ideal,
        "steady_vs_ideal": steady / ideal,
        "missing_pages": len(web.expected_pages() - set(fetched)),
        "duplicate_fetches": sum(c - 1 for c in fetched.values()),
        "politeness": {
            "max_in_flight_per_address": max(per_address.values()),
            "max_in_flight_per_host": max(per_host.values()),
            "hosts_idle_below_delay": sum(i < cfg["delay"] for i in idle.values()),
            "min_idle_s": min(idle.values()),
        },
        "address_denied": sum(s.get("frontier/address_denied", 0) for s in stats),
        "address_woken": sum(s.get("frontier/address_woken", 0) for s in stats),
        "worker_cpu_s": cpu,
        "worker_ms_per_page": 1000 * sum(cpu) / n,
        "wall_s": wall,
    }


def print_address(section: dict[str, Any]) -> None:
    cost = section["cap_cost"]
    c = cost["config"]
    w = c["web"]
    print(
        f"\nAddress cap where it does not bind: {w['hosts']} hosts (one address each) x "
        f"{w['pages']} pages, delay {c['delay']} s, {c['workers']} workers"
    )
    for r in cost["runs"]:
        p = r["politeness"]
        print(
            f"  {r['name']:<22} {r['pages_per_s']:6.1f} p/s (steady {r['steady_pages_per_s']:6.1f})"
            f"  in flight/host {p['max_in_flight_per_host']}  gaps<delay {p['gaps_below_delay']}"
            f"  denied {r['address_denied']}  missing {r['missing_urls']}"
        )
    ratio = cost["on_vs_off"]
    rounds = ", ".join(f"{x:.3f}" for x in cost["round_ratios"])
    print(
        f"  cap on / off, medians: {ratio['pages_per_s']:.3f} (steady "
        f"{ratio['steady_pages_per_s']:.3f}); per round: {rounds}"
    )
    spread = section["cap_binding"]
    c = spread["config"]
    print(
        f"\nAddress cap binding: {c['hosts']} names on {c['addresses']} addresses x "
        f"{c['pages']} pages, latency {c['latency_s'][0]}-{c['latency_s'][1]} s, delay "
        f"{c['delay']} s, cap {c['cap']}, {c['workers']} workers"
    )
    for r in spread["runs"]:
        i, p = r["ideal"], r["politeness"]
        print(
            f"  {r['name']:<22} {r['pages_per_s']:6.1f} p/s (steady {r['steady_pages_per_s']:6.1f})"
            f"  ideal {i['pages_per_s']:.1f} ({i['binds']} bound; addresses "
            f"{i['address_bound']:.1f}, hosts {i['host_bound']:.1f}): "
            f"{r['pages_per_s_vs_ideal']:.3f} "
            f"(steady {r['steady_vs_ideal']:.3f})"
        )
        print(
            f"  {'':<22} in flight/address {p['max_in_flight_per_address']}, /host "
            f"{p['max_in_flight_per_host']}, hosts idle<delay {p['hosts_idle_below_delay']}, "
            f"missing {r['missing_pages']}, dup {r['duplicate_fetches']}, "
            f"CPU {r['worker_ms_per_page']:.2f} ms/page"
        )
