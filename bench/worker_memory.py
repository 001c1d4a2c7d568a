"""A worker's memory over a long crawl: its RSS, sampled while it crawls a synthetic web.

One ``scrapy crawl web`` worker (real redis-server, no delay, CONCURRENT_REQUESTS 32)
crawls a loopback web of ``--hosts`` x ``--pages`` pages (testkit/testweb.py; default
2,000 x 50 = 100,000 pages, 6 links a page). Every ``--every`` seconds the harness
reads the worker's RSS (``/proc/<pid>/status`` VmRSS) and the pages it has crawled
(Scrapy's LogStats line, every 2 s). Bounded means: once its caches are full, RSS no
longer grows with pages crawled. So that they fill early, the caches sized in pages
or pairs (``CRAWL_LOCAL_SEEN_SIZE``, ``CRAWL_KNOWN_LINKS_SIZE``, and
``CRAWL_SENT_VOTES_SIZE``: on this web each page's link to another host is a new
(vote, host) pair) are set to ``--cache-size`` (default 10,000, full after ~20,000
URLs; ``--cache-size default`` keeps the project's defaults, whose caches are not
full within 100,000 pages); every other per-host or per-URL structure keeps its
default bound. The figures: RSS at 10 %, 25 %, 50 %, 75 % and 100 % of the crawl, RSS at the end
÷ RSS after warm-up (25 %,
``--warmup``), and the slope of RSS against pages after warm-up (least squares, MB
per 10,000 pages), over the samples taken while it crawls (the close, which
finishes and uploads the last WARC file, is reported apart). ``--plain`` also
runs plain single-process Scrapy (its own
scheduler and dupefilter, same spider and settings) on the same web, as the
baseline: its dupefilter and queue grow with every URL.

    .venv/bin/python bench/worker_memory.py                 # 100,000 pages (~15-25 min)
    .venv/bin/python bench/worker_memory.py --plain         # and plain Scrapy's
    .venv/bin/python bench/worker_memory.py --quick         # 200 x 50 pages, a smoke test

The worker runs an export of one commit (``--rev``, default HEAD; ``--live``: the
working tree), as bench/crawl_rate.py does. Writes bench/results/worker_memory.json
(``-quick`` for --quick); logs under bench/results/worker_memory/.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

import crawl_rate  # noqa: E402  (the code export, PLAIN_SCRAPY, run_record, save)

from testkit.crawlproc import WorkerProcess, start_worker, stats_of, tail  # noqa: E402
from testkit.redis_server import RedisServer  # noqa: E402
from testkit.testweb import WebProcess  # noqa: E402

RESULTS = REPO / "bench" / "results"
LOGSTATS_SECONDS = 2.0
CRAWLED_RE = re.compile(rb"Crawled (\d+) pages")
CACHE_SETTINGS = ("CRAWL_LOCAL_SEEN_SIZE", "CRAWL_KNOWN_LINKS_SIZE", "CRAWL_SENT_VOTES_SIZE")
MARKS = (0.10, 0.25, 0.50, 0.75, 1.0)


def rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(m.group(1)) / 1024 if m else None


class PagesSeen:
    """The last LogStats page count in a worker's log, read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.pages = 0
        self._rest = b""

    def read(self) -> int:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return self.pages
        self.offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for line in lines:
            m = CRAWLED_RE.search(line)
            if m:
                self.pages = int(m.group(1))
        return self.pages


def sample_crawl(
    name: str, variant: str, web_opts: dict[str, Any], settings: dict[str, Any], args: Any
) -> dict[str, Any]:
    """One crawl, sampling the worker's RSS and pages until it exits."""
    workdir = RESULTS / "worker_memory" / name
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    web = WebProcess(workdir / "web", dict(web_opts)).start(timeout=300)
    redis_server = RedisServer().start() if variant == "frontier" else None
    crawl_rate.worker_pythonpath(crawl_rate.CODE_ROOT)
    samples: list[tuple[float, int, float]] = []
    proc: WorkerProcess | None = None
    try:
        url = redis_server.url if redis_server else "redis://127.0.0.1:9/0"
        log = workdir / "worker.log"
        proc = start_worker(
            crawl_rate.CODE_ROOT, url, "bench", web.seeds, settings, log, spider="web"
        )
        seen = PagesSeen(log)
        started = time.monotonic()
        deadline = started + args.timeout
        while proc.poll() is None:
            rss = rss_mb(proc.pid)
            if rss is not None:
                samples.append((round(time.monotonic() - started, 2), seen.read(), round(rss, 2)))
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise TimeoutError(f"{name}: still crawling after {args.timeout} s\n{tail(log)}")
            time.sleep(args.every)
        if proc.returncode:
            raise RuntimeError(f"{name}: worker exit code {proc.returncode}\n{tail(log)}")
        stats = stats_of(log)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        web.stop()
        if redis_server is not None:
            redis_server.stop()
    pages = stats.get("response_received_count", 0)
    return {
        "name": name,
        "variant": variant,
        "settings": settings,
        "pages": pages,
        "samples": samples,
        "summary": summarise(samples, pages, args.warmup),
        "memusage_max_mb": stats.get("memusage/max", 0) / 2**20,
        "workdir": str(workdir.relative_to(REPO)),
    }


def summarise(samples: list[tuple[float, int, float]], pages: int, warmup: float) -> dict[str, Any]:
    """RSS at each mark (the first sample at or past that share of the pages), the
    end ÷ after-warm-up ratio and the slope after warm-up, over the samples taken
    while the worker crawled: not its start, nor its close (the last WARC file
    finished and uploaded, the frontier's hand-back), whose peak is reported apart."""
    crawling = [(p, r) for _, p, r in samples if 0 < p < pages]
    if not crawling or pages <= 0:
        return {}
    pages = crawling[-1][0]  # the last count logged while crawling
    at: dict[str, float] = {}
    for mark in MARKS:
        goal = mark * pages
        hit = next((r for p, r in crawling if p >= goal), crawling[-1][1])
        at[f"{mark:.0%}"] = hit
    after = [(p, r) for p, r in crawling if p >= warmup * pages]
    slope = None
    if len(after) >= 3 and after[-1][0] > after[0][0]:
        xs, ys = [p for p, _ in after], [r for _, r in after]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        den = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den * 10_000
    base = next((r for p, r in crawling if p >= warmup * pages), crawling[-1][1])
    last = crawling[-1][1]
    return {
        "rss_mb_at": at,
        "rss_mb_after_warmup": base,
        "rss_mb_last": last,
        "rss_mb_max": max(r for _, r in crawling),
        "rss_mb_max_with_close": max(r for _, _, r in samples),
        "end_over_warmup": last / base if base else None,
        "slope_mb_per_10k_pages_after_warmup": slope,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--pages", type=int, default=50, help="pages per host")
    ap.add_argument(
        "--cache-size",
        default="10000",
        help="the three caches' sizes (CACHE_SETTINGS; 'default': the project's)",
    )
    ap.add_argument("--warmup", type=float, default=0.25, help="share of the crawl")
    ap.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    ap.add_argument("--plain", action="store_true", help="also run plain Scrapy (baseline)")
    ap.add_argument("--quick", action="store_true", help="200 x 50 pages: check the script")
    ap.add_argument("--rev", default="HEAD", help="the commit the worker runs (default HEAD)")
    ap.add_argument("--live", action="store_true", help="run the working tree instead of --rev")
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds per crawl")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra Scrapy setting for the frontier worker (experiments)",
    )
    ap.add_argument("--out", type=Path, help="default bench/results/worker_memory[-quick].json")
    args = ap.parse_args(argv)
    if args.quick:
        args.hosts, args.pages = 200, 50
    shown = args.out
    args.out = (
        args.out or RESULTS / f"worker_memory{'-quick' if args.quick else ''}.json"
    ).resolve()
    code = {"live_working_tree": str(REPO)} if args.live else crawl_rate.snapshot_code(args.rev)
    web = {
        "hosts": args.hosts,
        "pages": args.pages,
        "latency_ms": (0, 2),
        "body_bytes": 2048,
        "seed": 3,
    }
    common: dict[str, Any] = {
        "CONCURRENT_REQUESTS": 32,
        "LOG_LEVEL": "INFO",
        "LOGSTATS_INTERVAL": LOGSTATS_SECONDS,
        "MEMUSAGE_ENABLED": True,
    }
    frontier = {**common, "CRAWL_HOST_DELAY": 0, "CRAWL_IDLE_CLOSE_SECONDS": 2.0}
    if args.cache_size != "default":
        frontier.update({name: int(args.cache_size) for name in CACHE_SETTINGS})
    for item in args.set:
        name, _, value = item.partition("=")
        frontier[name] = value
    out: dict[str, Any] = {
        **crawl_rate.run_record(),
        "code": code,
        "web": web,
        "cache_size": args.cache_size,
        "extra_settings": args.set,
        "runs": [],
    }
    plan = [("frontier", "frontier", frontier)]
    if args.plain:
        plan.append(("plain", "plain", {**common, **crawl_rate.PLAIN_SCRAPY}))
    t = time.monotonic()
    for name, variant, settings in plan:
        print(f"[worker memory] {name}: {args.hosts} hosts x {args.pages} pages ...", flush=True)
        run = sample_crawl(name, variant, web, settings, args)
        out["runs"].append(run)
        crawl_rate.save(out, args)
        print_run(run)
    out["total_s"] = time.monotonic() - t
    out["machine"]["loadavg_at_end"] = os.getloadavg()
    crawl_rate.save(out, args)
    print(f"\nwrote {shown or args.out.relative_to(REPO)} ({out['total_s']:.0f} s)")


def print_run(run: dict[str, Any]) -> None:
    s = run["summary"]
    if not s:
        print(f"  {run['name']}: no samples")
        return
    marks = ", ".join(f"{k} {v:.1f}" for k, v in s["rss_mb_at"].items())
    slope = s["slope_mb_per_10k_pages_after_warmup"]
    slope_text = "n/a" if slope is None else f"{slope:+.2f}"
    print(
        f"  {run['name']}: {run['pages']} pages; RSS MB at {marks}; end / after warm-up "
        f"{s['end_over_warmup']:.3f}; slope after warm-up "
        f"{slope_text} MB per 10,000 pages; max {s['rss_mb_max']:.1f} while crawling, "
        f"{s['rss_mb_max_with_close']:.1f} with the close"
    )


if __name__ == "__main__":
    main()
