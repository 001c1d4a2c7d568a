"""What the fleet-wide robots.txt middleware (middlewares/robotstxt.py) costs.

Real ``scrapy crawl web`` workers on the synthetic loopback web of
testkit/testweb.py, one fresh redis-server and a fresh crawl name per run,
crawls started and timed by bench/crawl_rate.py's ``run_crawl``. Every host
serves a 200 robots.txt (``Disallow: /private/``, which no page of the graph
lives under, so the page set is the same with robots on or off; a tenth of the
hosts add a ``Crawl-delay`` of half the host delay, which must not slow them).
Every figure comes from the web's SERVER-side request log.

1. Fleet (``fleet-4w``): 200 hosts x 30 pages, 4 worker processes, robots on.
   robots.txt requests per host (min / max / mean, hosts with != 1): the
   target is exactly one fetch per host for the whole fleet.

2. Overhead: the delay-bound shape of crawl_rate.py's part A with 200 hosts
   (30 pages per host, per-host latency 10-80 ms, CRAWL_HOST_DELAY=1.0,
   2 workers, project defaults otherwise, adaptive delay included), run
   alternately robots ON (project default), OFF (CRAWL_ROBOTS_OBEY=False),
   ON, OFF ... (``--repeats`` pairs). pages/s = page requests (robots.txt
   excluded) / (last end - first start) over ALL requests of the run, so the
   robots.txt fetches' time counts against ON. Reports each run, the median
   per side and the ratio ON/OFF (target: within 5 %), next to the ideal: a
   host of P URLs needs one more slot with robots on (robots.txt, then one
   delay, then its first page), so ON/OFF ~ P / (P + 1).

Every run also reports politeness server-side (``politeness_report`` with the
host delay, robots.txt requests included: hosts with more than one request in
flight, start-to-start gaps and end-to-start idles below the delay; all must be
0), its robots.txt requests, the workers' ``robotstxt/*`` and
``frontier/deferred`` stats (summed over workers), and the machine's load.

    .venv/bin/python bench/robots_overhead.py              # full (~6 min)
    .venv/bin/python bench/robots_overhead.py --quick      # smoke test (< 1 min)
    .venv/bin/python bench/robots_overhead.py --repeats 5

Writes bench/results/robots_overhead.json (-quick.json with --quick), keeps the
run directories under bench/results/robots_overhead/ and prints a Markdown
summary with the command line that produced it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from benchlib import REPO, RESULTS  # also puts the repository on sys.path

from bench import crawl_rate
from testkit.testweb import (
    OUT_OF_SCOPE_IP,
    RequestRecord,
    host_ip,
    politeness_report,
)

ROBOTS = "/robots.txt"
CRAWL_DELAY_EVERY = 10  # every tenth host's robots.txt has a Crawl-delay


# -- configuration ---------------------------------------------------------------------


def config(quick: bool) -> dict[str, Any]:
    """crawl_rate.py's delay-bound configuration, resized."""
    cfg = crawl_rate.delay_config(False)
    cfg["web"].update(dict(hosts=20, pages=10) if quick else dict(hosts=200, pages=30))
    cfg.update(delay=0.2 if quick else 1.0, workers=2, fleet_workers=4)
    cfg["crawl_delay"] = cfg["delay"] / 2  # below the host delay: must change nothing
    cfg["web"]["special"] = robots_routes(cfg["web"]["hosts"], cfg["crawl_delay"])
    return cfg


def robots_routes(hosts: int, crawl_delay: float) -> dict[int, dict[str, dict[str, Any]]]:
    plain = "User-agent: *\nDisallow: /private/\n"
    slow = f"{plain}Crawl-delay: {crawl_delay:g}\n"
    return {
        h: {ROBOTS: {"body": slow if h % CRAWL_DELAY_EVERY == 0 else plain}}
        for h in range(1, hosts + 1)
    }


def frontier_settings(cfg: dict[str, Any], robots: bool) -> dict[str, Any]:
    """crawl_rate.py's settings for our frontier workers, robots.txt on or off."""
    settings = next(s for _, variant, _, s in crawl_rate.delay_plan(cfg) if variant == "frontier")
    return {**settings, "CRAWL_ROBOTS_OBEY": robots}


# -- one run ----------------------------------------------------------------------------


@contextlib.contextmanager
def crawl_named(name: str) -> Iterator[None]:
    """run_crawl always names its crawl "bench": give this run's workers its own name."""
    start = crawl_rate.start_worker

    def start_named(root: Any, url: str, _crawl: str, *args: Any, **kwargs: Any) -> Any:
        return start(root, url, name, *args, **kwargs)

    with mock.patch.object(crawl_rate, "start_worker", start_named):
        yield


def summed_stats(worker_stats: list[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for stats in worker_stats:
        total.update(
            {
                k: v
                for k, v in stats.items()
                if k.startswith("robotstxt/") or k == "frontier/deferred"
            }
        )
    return dict(sorted(total.items()))


def politeness(log: list[RequestRecord], delay: float) -> dict[str, Any]:
    report = politeness_report(log, delay).values()
    return {
        "hosts_over_1_in_flight": sum(p.max_in_flight > 1 for p in report),
        "gaps_below_delay": sum(p.gaps_below_delay for p in report),
        "idle_below_delay": sum(p.idle_below_delay for p in report),
        "min_start_gap_s": min((p.min_gap for p in report if p.min_gap is not None), default=None),
        "min_idle_s": min((p.min_idle for p in report if p.min_idle is not None), default=None),
    }


def robots_per_host(log: list[RequestRecord], hosts: int) -> dict[str, Any]:
    counts = Counter(r.host_ip for r in log if r.path == ROBOTS)
    per_host = [counts.get(host_ip(h), 0) for h in range(1, hosts + 1)]
    return {
        "min": min(per_host),
        "max": max(per_host),
        "mean": statistics.fmean(per_host),
        "hosts_not_1": {host_ip(h): n for h, n in enumerate(per_host, 1) if n != 1},
        "statuses": dict(Counter(r.status for r in log if r.path == ROBOTS)),
    }


def measure(cfg: dict[str, Any], name: str, robots: bool, workers: int) -> dict[str, Any]:
    delay, hosts = cfg["delay"], cfg["web"]["hosts"]
    crawl = f"robots-{name}-{uuid.uuid4().hex[:8]}"
    print(f"[robots_overhead] {name}: robots {'ON' if robots else 'OFF'}, {workers} workers, "
          f"crawl {crawl} ...", flush=True)  # fmt: skip
    load_before = os.getloadavg()
    with crawl_named(crawl):
        run = crawl_rate.run_crawl(
            RESULTS / "robots_overhead" / name,
            cfg["web"],
            "frontier",
            workers,
            frontier_settings(cfg, robots),
            timeout=300 + 4 * cfg["web"]["pages"] * delay,
        )
    log = [r for r in run["log"] if r.host_ip != OUT_OF_SCOPE_IP]
    base = crawl_rate.analyse(run, delay)  # page set, duplicates, CPU: pages only
    first, last = min(r.start for r in log), max(r.end for r in log)
    res = {
        "name": name,
        "robots": robots,
        "workers": workers,
        "crawl": crawl,
        "pages": base["pages"],
        "span_s": last - first,
        "pages_per_s": base["pages"] / (last - first),
        "pages_only_pages_per_s": base["pages_per_s"],
        "steady_pages_per_s": base["steady_pages_per_s"],
        "robots_requests": sum(r.path == ROBOTS for r in log),
        "robots_per_host": robots_per_host(log, hosts),
        "politeness": politeness(log, delay),
        "worker_stats": summed_stats(run["worker_stats"]),
        "load": {"before": load_before, "after": os.getloadavg()},
        "system_busy_cores": run["system_busy_cores"],
        "foreign_cores": run["foreign_cores"],
        "worker_cpu_s": run["worker_cpu_s"],
        "workdir": run["workdir"],
    }
    for key in ("unique_urls", "duplicate_fetches", "missing_urls", "unexpected_urls", "non_200"):
        res[key] = base[key]
    print(f"    {res['pages']} pages in {res['span_s']:.1f} s: {res['pages_per_s']:.1f} pages/s; "
          f"{res['robots_requests']} robots.txt requests; politeness {res['politeness']}; "
          f"load {load_before[0]:.2f}", flush=True)  # fmt: skip
    return res


# -- the benchmark ------------------------------------------------------------------------


def ideal_ratio(description: dict[str, Any], delay: float) -> dict[str, float]:
    """ON/OFF if every host went at exactly its delay: one more slot per host with robots."""
    per_host = len(description["expected_urls"]) / len(description["latency_s"])
    lat = description["latency_s"].values()
    # Both crawls end with their slowest host: n fetches need n latencies and n - 1 delays.
    off = max(per_host * s + (per_host - 1) * delay for s in lat)
    on = max((per_host + 1) * s + per_host * delay for s in lat)
    return {"urls_per_host": per_host, "p_over_p_plus_1": per_host / (per_host + 1),
            "slowest_host": off / on}  # fmt: skip


def run_all(args: argparse.Namespace, out: dict[str, Any]) -> None:
    cfg = config(args.quick)
    out["config"] = cfg
    fleet = measure(cfg, f"fleet-{cfg['fleet_workers']}w", True, cfg["fleet_workers"])
    out["fleet"] = fleet
    crawl_rate.save(out, args)
    runs: list[dict[str, Any]] = []
    out["runs"] = runs
    for i in range(1, args.repeats + 1):
        for robots in (True, False):
            name = f"{'on' if robots else 'off'}-{i}"
            runs.append(measure(cfg, name, robots, cfg["workers"]))
            crawl_rate.save(out, args)
    med = {
        side: statistics.median(r["pages_per_s"] for r in runs if r["robots"] is on)
        for side, on in (("on", True), ("off", False))
    }
    desc = (REPO / fleet["workdir"] / "web" / "testweb-ready.json").read_text()
    out["summary"] = {
        "median_pages_per_s": med,
        "ratio_on_off": med["on"] / med["off"],
        "pair_ratios": [
            a["pages_per_s"] / b["pages_per_s"] for a, b in zip(runs[::2], runs[1::2], strict=True)
        ],
        "ideal": ideal_ratio(json.loads(desc), cfg["delay"]),
    }


def markdown(out: dict[str, Any]) -> str:
    cfg, fleet, runs, summary = out["config"], out["fleet"], out["runs"], out["summary"]
    web, ideal = cfg["web"], summary["ideal"]
    rph = fleet["robots_per_host"]
    lines = [
        f"`{out['command']}` ({out['date']}, code {out['code'].get('commit', 'working tree')[:12]}"
        f", load avg at start {out['machine']['loadavg_at_start'][0]:.2f})",
        "",
        f"1. robots.txt fetches per host: {web['hosts']} hosts x {web['pages']} pages, "
        f"{fleet['workers']} workers, delay {cfg['delay']:g} s",
        "",
        "| hosts | workers | robots.txt requests | per host min | max | mean | hosts != 1 "
        "| pages | missing | dup | in flight > 1 | idle < delay | frontier/deferred |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {web['hosts']} | {fleet['workers']} | {fleet['robots_requests']} | {rph['min']} "
        f"| {rph['max']} | {rph['mean']:.3f} | {len(rph['hosts_not_1'])} | {fleet['pages']} "
        f"| {fleet['missing_urls']} | {fleet['duplicate_fetches']} "
        f"| {fleet['politeness']['hosts_over_1_in_flight']} "
        f"| {fleet['politeness']['idle_below_delay']} "
        f"| {fleet['worker_stats'].get('frontier/deferred', 0)} |",
        "",
        f"2. pages/s, robots on vs off: {web['hosts']} hosts x {web['pages']} pages, latency "
        f"{web['latency_ms'][0]}-{web['latency_ms'][1]} ms, CRAWL_HOST_DELAY={cfg['delay']:g}, "
        f"{cfg['workers']} workers; pages/s = pages / (last end - first start), robots.txt "
        "requests included in the span",
        "",
        "| run | pages | span s | pages/s | robots.txt req | robotstxt/request_count "
        "| frontier/deferred | robotstxt/waited | in flight > 1 | gap < delay | idle < delay "
        "| missing | dup | load 1-min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        st, pol = r["worker_stats"], r["politeness"]
        lines.append(
            f"| {r['name']} | {r['pages']} | {r['span_s']:.1f} | {r['pages_per_s']:.1f} "
            f"| {r['robots_requests']} | {st.get('robotstxt/request_count', 0)} "
            f"| {st.get('frontier/deferred', 0)} | {st.get('robotstxt/waited', 0)} "
            f"| {pol['hosts_over_1_in_flight']} | {pol['gaps_below_delay']} "
            f"| {pol['idle_below_delay']} | {r['missing_urls']} | {r['duplicate_fetches']} "
            f"| {r['load']['before'][0]:.2f} |"
        )
    med = summary["median_pages_per_s"]
    pairs = ", ".join(f"{x:.3f}" for x in summary["pair_ratios"])
    lines += [
        "",
        f"median pages/s: ON {med['on']:.1f}, OFF {med['off']:.1f}; ratio ON/OFF "
        f"**{summary['ratio_on_off']:.3f}** (target >= 0.95; per pair {pairs}); ideal "
        f"P/(P+1) = {ideal['p_over_p_plus_1']:.3f} with P = {ideal['urls_per_host']:g} URLs "
        f"per host ({ideal['slowest_host']:.3f} for the slowest host's makespan)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 hosts x 10 pages, delay 0.2, 1 pair")
    ap.add_argument("--repeats", type=int, help="ON/OFF pairs (default 3, 1 with --quick)")
    ap.add_argument("--rev", default="HEAD", help="git revision the workers run (default HEAD)")
    ap.add_argument("--live", action="store_true", help="run the working tree instead of --rev")
    ap.add_argument("--out", type=Path, help="default bench/results/robots_overhead[-quick].json")
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    args.out = (
        args.out or RESULTS / f"robots_overhead{'-quick' if args.quick else ''}.json"
    ).resolve()
    out: dict[str, Any] = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg()},
        "quick": args.quick,
        "code": {"live_working_tree": str(REPO)}
        if args.live
        else crawl_rate.snapshot_code(args.rev),
    }
    t = time.monotonic()
    run_all(args, out)
    out["total_s"] = time.monotonic() - t
    out["machine"]["loadavg_at_end"] = os.getloadavg()
    out["markdown"] = markdown(out)
    crawl_rate.save(out, args)
    print("\n" + out["markdown"])
    print(f"\nwrote {args.out.relative_to(REPO)} ({out['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
