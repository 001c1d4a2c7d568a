"""Mirrors and soft-404/farm traps under real ``scrapy crawl web`` workers.

    .venv/bin/python bench/trap_spaces.py [--seeds 1,2,3] [--workers 3]

A. Mirror: tests/test_dedupe_fleet.py's site and its mirror (25 shared pages in
   a tree, each also linking to a page only its own host has), crawled with
   CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS = ``none`` (the old default) and
   ``other_host`` (the new one): pages of either host never fetched, URLs
   fetched twice, mirror copies counted.
B. Traps: tests/test_trap_spaces.py's web (4 ordinary sites of 15 pages, a
   soft-404 host and a link farm, each with 15 ordinary pages too), default
   settings: fetches of each trap's URLs (robots.txt excluded), probes sent,
   ordinary pages missed, and the crawl's wall time to its own end.

One fresh redis-server per run; every count comes from the test web's own log.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchlib import RedisServer

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.sites import SHARED_PAGES, site_pages
from testkit.testweb import TestWeb, page_counts

FAST = {"CRAWL_HOST_DELAY": 0.002, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}
PROBE_PATH = re.compile(r"/[0-9a-f]{16}-[0-9a-f]{16}\.html")


def crawl(web: TestWeb, workers: int, settings: dict[str, object]) -> tuple[Counter[str], float]:
    server = RedisServer()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            procs = [
                start_worker(REPO_ROOT, server.url, "bench", web.seeds, {**FAST, **settings},
                             Path(tmp) / f"w{i}.log")
                for i in range(workers)
            ]  # fmt: skip
            wait_all(procs, timeout=600)
            elapsed = time.monotonic() - start
            stats: Counter[str] = Counter()
            for proc in procs:
                stats.update(stats_of(proc.log_path))
    finally:
        server.stop()
    return stats, elapsed


def mirror(seed: int, workers: int) -> None:
    special = {1: site_pages(mirror=False), 2: site_pages(mirror=True)}
    for follow in ("none", "other_host"):
        with TestWeb(hosts=2, pages=1, links=1, cross_links=0, query_variants=0, seed=seed,
                     special=special) as web:  # fmt: skip
            stats, _ = crawl(web, workers, {"CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS": follow})
            expected = {web.base_url(h).rstrip("/") + p for h in (1, 2) for p in special[h]}
            fetched = page_counts(web.log)
        print(
            f"mirror seed={seed} workers={workers} follow={follow:10}: "
            f"{len(expected - set(fetched))} of {len(expected)} URLs never fetched, "
            f"{sum(n > 1 for n in fetched.values())} fetched twice, "
            f"mirror copies {stats['dedupe/mirror_copies']} (shared pages {SHARED_PAGES + 1})"
        )


def traps(seed: int, workers: int) -> None:
    with TestWeb(hosts=6, pages=15, latency_ms=0, links=3, cross_links=1, seed=seed,
                 traps={5: "soft404", 6: "farm"}) as web:  # fmt: skip
        stats, elapsed = crawl(web, workers, {})
        log = [r for r in web.log if r.path != "/robots.txt"]
        trap = web.trap_fetches(log)
        normal = {u for u in page_counts(log) if web.trap_kind(u) is None}
        probes = [r for r in log if PROBE_PATH.fullmatch(r.path)]
        missed = len(web.expected_urls - normal)
    print(
        f"traps  seed={seed} workers={workers}: soft404 host {trap[5]} trap fetches, "
        f"farm {trap[6]}; probes {len(probes)} ({', '.join(str(r.status) for r in probes)}); "
        f"trap/soft404 {stats['trap/soft404']}; ordinary pages missed {missed} of "
        f"{len(web.expected_urls)}; ended by itself after {elapsed:.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--workers", type=int, default=3)
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}", flush=True)
    for seed in map(int, args.seeds.split(",")):
        mirror(seed, args.workers)
        traps(seed, args.workers)


if __name__ == "__main__":
    main()
