"""Crawl rate of real ``scrapy crawl web`` workers on synthetic loopback webs.

Every figure comes from the test web's SERVER-side request log (start and end
time of each request): pages/s = page requests / (last end - first start).

A. Delay-bound (``--part delay``): 100 hosts x 30 pages, per-host latency
   10-80 ms, CRAWL_HOST_DELAY=1.0, seeds = every host's ``/``, one fresh
   redis-server per run. Our frontier with 1, 2 and 4 worker processes, against
   stock scrapy-redis (2 workers, DOWNLOAD_DELAY=1.0, bench/baseline_spiders)
   and plain single-process Scrapy (default scheduler, DOWNLOAD_DELAY=1.0, no
   jitter, CONCURRENT_REQUESTS_PER_DOMAIN=1). Reports the whole-run rate, the
   steady rate over the middle 80 % of requests, both against the nominal ideal
   (hosts / delay) and the latency-adjusted ideal (sum over hosts of
   1 / (delay + latency): our delay runs from the END of a fetch), and
   politeness violations counted server-side. Also how long each host waited
   between its fetches (``host_gaps``: the idle time from the end of a fetch
   to the start of the host's next, the gap the delay governs, p50 and p99
   over all pairs of all hosts and the worst host's p99, against the target
   delay + 0.1 s; start-to-start too) and the run's end against the ideal
   (every host fetched back to back, one delay after each answer). Gaps and
   politeness count every request a host served, robots.txt included.
   ``--farm web`` (the default since issue 43) is testkit/web_like.py's farm:
   robots.txt with ``Crawl-delay`` and a ``Disallow`` every page links, a third
   of the hosts mirrors (near-duplicate pages), redirects, 404s, links across
   hosts; ``--farm plain`` the pages-only farm of the figures before it.
   ``--delay-size 20x15`` a smaller farm (a diagnosis on a loaded machine),
   ``--no-baselines`` our frontier only, ``--code-dir DIR`` an export changed
   for an experiment.

B. CPU-bound (``--part cpu``): 250 hosts x 40 pages, latency 0-2 ms, no delay.
   ONE frontier worker (real redis-server), every default on, against plain
   single-process Scrapy: pip's Scrapy of the same version in a venv of its own
   (bench/plain_venv.py, made on first use), running bench/plain_project's
   spider (Scrapy's LinkExtractor, OffsiteMiddleware, duplicate filter and
   scheduler, robots.txt obeyed, an item a page to a JSON lines feed), same
   CONCURRENT_REQUESTS, alternating runs (A B A B ...), with each process's
   CPU seconds.

Diagnostics (not part of the benchmark figures):

* ``--part trace``: delay-bound frontier runs with bench/crawl_trace.py loaded,
  splitting the time between two fetches of one host into its steps
  (response -> release in Redis -> host ready -> claim -> downloader -> server),
  plus each worker's event-loop lag;
* ``--part trace-cpu``: one CPU-bound run per side with the same extension: how
  much of the crawl the downloader sat empty, and the frontier's claim calls;
* ``--part address``: politeness per server (bench/address_rate.py): the
  delay-bound crawl with the address cap on and off, rounds alternating, and
  200 host names on 10 addresses against the ideal the caps allow;
* ``--part profile``: one CPU-bound run per side under py-spy (raw stacks in
  bench/results/crawl_rate-profile-*.txt), summarised by package and subsystem.

Every run also records each worker's CPU seconds, its main thread's run-queue
wait (runnable, no CPU free) and the CPU the rest of the machine used meanwhile
("other cores"): the machine has 2 cores, shared with other jobs.

    .venv/bin/python bench/crawl_rate.py            # A and B, full size (~12 min)
    .venv/bin/python bench/crawl_rate.py --quick    # smoke test (~1 min)
    .venv/bin/python bench/crawl_rate.py --part cpu --repeats 3
    .venv/bin/python bench/crawl_rate.py --part trace --trace-workers 1 2 4
    .venv/bin/python bench/crawl_rate.py --part profile

Two revisions in one run (``--revs BASE,REV``): each round runs every revision's
export (the order alternating round by round: A B, B A, ...), and the report
gives each revision's medians and their ratio to the first, for ``--part cpu``
(frontier and plain Scrapy, both on that revision's code) and ``--part delay``
(our frontier only; the baselines are not what changed):

    .venv/bin/python bench/crawl_rate.py --part cpu --repeats 3 --revs 1cb6f38,5e394c7
    .venv/bin/python bench/crawl_rate.py --part delay --delay-repeats 2 --revs 1cb6f38,5e394c7

Writes bench/results/crawl_rate.json (crawl_rate-PART.json for the diagnostics,
-revs for --revs, -quick for --quick) and keeps logs under bench/results/crawl_rate/.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from itertools import pairwise
from operator import itemgetter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import benchlib  # noqa: E402, F401  (Debian's redis-server whatever PATH says; also for robots_overhead, store_puts)
import plain_venv  # noqa: E402

from testkit.crawlproc import WorkerProcess, start_worker, stats_of, tail  # noqa: E402
from testkit.redis_server import RedisServer  # noqa: E402
from testkit.testweb import (  # noqa: E402
    OUT_OF_SCOPE_IP,
    RequestRecord,
    WebProcess,
    fetch_counts,
    politeness_report,
)
from testkit.web_like import web_like_options  # noqa: E402

RESULTS = REPO / "bench" / "results"
BASELINE_PROJECT = REPO / "bench" / "baseline_spiders"
CODE_DIRS = ("crawlproject", "spiders", "middlewares", "pipelines", "scrapy.cfg")
# Where the workers import the project from: a snapshot of one commit (see
# snapshot_code), so edits landing in the working tree mid-benchmark change nothing.
CODE_ROOT = REPO
EXTRA_SETTINGS: dict[str, str] = {}  # --set NAME=VALUE: added to every worker of every run
CLK_TCK = os.sysconf("SC_CLK_TCK")

PLAIN_SCRAPY = {  # Scrapy's own scheduler and dupefilter, the frontier's ack middlewares off
    "SCHEDULER": "scrapy.core.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
    # The middlewares are meant to raise NotConfigured here, but their check,
    # issubclass(cls, FrontierScheduler), is true for ANY scheduler class:
    # BaseScheduler's metaclass duck-types __subclasscheck__. So switch them off.
    "SPIDER_MIDDLEWARES": {"middlewares.frontier_ack.FrontierAckSpiderMiddleware": None},
    "DOWNLOADER_MIDDLEWARES": {"middlewares.frontier_ack.FrontierAckDownloaderMiddleware": None},
}


# -- sizes ---------------------------------------------------------------------------


def delay_config(
    quick: bool, farm: str = "plain", size: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """``farm``: ``plain`` (pages linking pages) or ``web`` (testkit/web_like.py: robots.txt
    with a Crawl-delay and a Disallow every page links, mirrors, redirects, 404s);
    ``size``: (hosts, pages) instead of 100 x 30 (20 x 5 with ``quick``)."""
    delay = 1.0
    web: dict[str, Any] = dict(hosts=20, pages=5) if quick else dict(hosts=100, pages=30)
    if size:
        web = dict(hosts=size[0], pages=size[1])
    if farm == "web":
        web = web_like_options(web["hosts"], web["pages"], delay, latency_ms=(10, 80), seed=1)
    web.update(latency_ms=(10, 80), seed=1)
    return {
        "farm": farm,
        "web": web,
        "delay": delay,
        "frontier_workers": [1, 2] if quick else [1, 2, 4],
        "redis_workers": 2,
        # Our frontier claims only ready hosts, so the project default (32) is plenty.
        # Scrapy counts requests waiting out a slot's delay as active (needs_backout),
        # so the baselines get 2 x hosts or they could not keep every host busy.
        "frontier_concurrency": 32,
        "baseline_concurrency": 2 * web["hosts"],
        "idle_close": 2.0,
    }


def cpu_config(quick: bool) -> dict[str, Any]:
    web = dict(hosts=20, pages=5) if quick else dict(hosts=250, pages=40)
    web.update(latency_ms=(0, 2), body_bytes=2048, seed=2)
    return {"web": web, "concurrency": 32, "idle_close": 2.0}


# -- running one crawl ---------------------------------------------------------------


def export_code(rev: str) -> tuple[Path, dict[str, Any]]:
    """Exports the project code of ``rev`` (once per commit) and says where it is.

    Others commit to this repository while the benchmark runs; each worker is a
    fresh process, so without this one table could mix several versions.
    """

    def git(*a: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *a], check=True, capture_output=True, text=True
        ).stdout.strip()

    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    dest = RESULTS / "crawl_rate" / f"code-{commit[:12]}"
    if not dest.exists():
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", commit, *CODE_DIRS],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        tmp.replace(dest)
    return dest, {
        "rev": rev,
        "commit": commit,
        "subject": git("log", "-1", "--format=%s", commit),
        "working_tree_changes_ignored": git("status", "--porcelain", "--", *CODE_DIRS).splitlines(),
        "snapshot": str(dest.relative_to(REPO)),
    }


def export_revs(value: str) -> list[tuple[str, Path, dict[str, Any]]]:
    """``--revs BASE,REV[,...]``: each revision's label (its short commit), export and
    description (bench/frontier_ops.py takes them too); ValueError, for the command
    line, unless they are two or more distinct commits."""
    names = [rev for rev in value.split(",") if rev]
    if len(names) < 2:
        raise ValueError("--revs takes two or more revisions, the first the baseline: --revs A,B")
    exports = []
    for rev in names:
        try:
            root, info = export_code(rev)
        except subprocess.CalledProcessError:
            raise ValueError(f"--revs: {rev!r} names no commit of this repository") from None
        exports.append((info["commit"][:7], root, info))
    if len({label for label, _, _ in exports}) < len(exports):
        raise ValueError(f"--revs names one commit twice: {value}")
    return exports


def snapshot_code(rev: str) -> dict[str, Any]:
    """Makes every worker import the project code of ``rev`` (see export_code)."""
    global CODE_ROOT
    CODE_ROOT, info = export_code(rev)
    worker_pythonpath(CODE_ROOT)  # for scripts that start workers themselves (robots_overhead)
    return info


def worker_pythonpath(code_root: Path) -> None:
    """The workers import the project from ``code_root`` (before the editable install's
    finder), ``bench.*`` from the repository; the scrapy-redis baseline's spider too."""
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(code_root), str(REPO)]))


def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def system_busy_seconds() -> float:
    """CPU seconds spent non-idle by the whole machine so far (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def runqueue_wait_seconds(pid: int) -> float | None:
    """Time the process's main thread spent runnable but not running (CPU contention)."""
    try:
        return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def wait_with_rusage(
    procs: list[WorkerProcess], timeout: float
) -> tuple[list[int], list[float], list[float], list[float | None]]:
    """Waits for every worker via wait4: (exit codes, CPU seconds, exit times, run-queue
    wait seconds of the main thread, as last sampled before exit)."""
    pending = {p.pid: p for p in procs}
    cpu: dict[int, float] = {}
    ended: dict[int, float] = {}
    runq: dict[int, float | None] = {}
    deadline = time.monotonic() + timeout
    while pending:
        for pid in pending:
            runq[pid] = runqueue_wait_seconds(pid) or runq.get(pid)
        for pid, proc in list(pending.items()):
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
            if wpid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu[pid] = ru.ru_utime + ru.ru_stime
                ended[pid] = time.time()
                del pending[pid]
        if not pending:
            break
        if time.monotonic() > deadline:
            for proc in pending.values():
                proc.kill()
                proc.wait()
            logs = "\n".join(f"--- {p.log_path}\n{tail(p.log_path)}" for p in procs)
            raise TimeoutError(f"workers {list(pending)} still running after {timeout}s\n{logs}")
        time.sleep(0.05)
    return (
        [p.returncode for p in procs],
        [cpu[p.pid] for p in procs],
        [ended[p.pid] for p in procs],
        [runq.get(p.pid) for p in procs],
    )


def redis_commandstats(url: str) -> dict[str, dict[str, float]]:
    import redis

    client = redis.Redis.from_url(url)
    try:
        info = client.info("commandstats")
    finally:
        client.close()
    return {
        k.removeprefix("cmdstat_"): {"calls": v["calls"], "usec": v["usec"]}
        for k, v in info.items()
    }


def per_worker(settings: dict[str, Any], i: int, workdir: Path) -> dict[str, Any]:
    """``{i}`` and ``{dir}`` in a string setting: worker index and run directory."""
    out = {}
    for k, v in settings.items():
        if isinstance(v, str) and ("{i}" in v or "{dir}" in v):
            v = v.replace("{i}", str(i)).replace("{dir}", str(workdir))
        out[k] = v
    return out


def run_crawl(
    workdir: Path,
    web_opts: dict[str, Any],
    variant: str,
    workers: int,
    settings: dict[str, Any],
    timeout: float,
    profile: str | None = None,
    code_root: Path | None = None,
) -> dict[str, Any]:
    """One crawl on a fresh web (and a fresh redis-server unless plain Scrapy).

    variant: ``frontier`` (scrapy crawl web), ``scrapy-redis`` (bench/baseline_spiders),
    ``scrapy`` (pip's Scrapy in a venv of its own: bench/plain_venv.py)
    or ``plain`` (scrapy crawl web on Scrapy's own scheduler, one process).
    code_root: the project code the workers run (default: CODE_ROOT, see --rev).
    """
    settings = {**settings, **EXTRA_SETTINGS}
    code_root = code_root or CODE_ROOT
    worker_pythonpath(code_root)
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    web = WebProcess(workdir / "web", dict(web_opts)).start()
    redis_server = RedisServer().start() if variant not in ("plain", "scrapy") else None
    spy: subprocess.Popen[bytes] | None = None
    try:
        # Plain Scrapy ignores REDIS_URL; a closed port makes sure it never connects.
        url = redis_server.url if redis_server else "redis://127.0.0.1:9/0"
        root, spider = (
            (BASELINE_PROJECT, "redisweb") if variant == "scrapy-redis" else (code_root, "web")
        )
        # scrapy: pip's Scrapy in its own venv (bench/plain_venv.py), items to a feed.
        python, crawl, feed = None, "bench", ()
        if variant == "scrapy":
            root, spider, python, crawl = (
                plain_venv.PROJECT,
                plain_venv.SPIDER,
                plain_venv.python(),
                None,
            )
            feed = ("-O", str(workdir / "items-{i}.jsonl"))
        launched = time.time()
        busy0 = system_busy_seconds()
        web_cpu0 = proc_cpu_seconds(web.proc.pid) if web.proc else None
        procs = [
            start_worker(
                root,
                url,
                crawl,
                web.seeds,
                per_worker(settings, i, workdir),
                workdir / f"worker-{i}.log",
                [arg.replace("{i}", str(i)) for arg in feed],
                spider=spider,
                python=python,
            )
            for i in range(workers)
        ]
        if profile:
            spy = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "py-spy"),
                    "record",
                    "--pid",
                    str(procs[0].pid),
                    "--rate",
                    "100",
                    "--full-filenames",
                    "--threads",
                    "--format",
                    profile.split(":")[0],
                    "-o",
                    profile.split(":", 1)[1],
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
        codes, cpu, ended, runq = wait_with_rusage(procs, timeout)
        busy = system_busy_seconds() - busy0
        wall = time.time() - launched
        web_cpu = proc_cpu_seconds(web.proc.pid) if web.proc else None
        if web_cpu is not None and web_cpu0 is not None:
            web_cpu -= web_cpu0  # its start-up (graph, ready file) is not crawl work
        redis_cpu = (
            proc_cpu_seconds(redis_server.proc.pid) if redis_server and redis_server.proc else None
        )
        cmdstats = redis_commandstats(redis_server.url) if redis_server else {}
        if spy is not None:
            spy.wait(60)
    finally:
        log = web.stop()
        if redis_server is not None:
            redis_server.stop()
        if spy is not None and spy.poll() is None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
    if any(codes):
        logs = "\n".join(f"--- {p.log_path}\n{tail(p.log_path)}" for p in procs)
        raise RuntimeError(f"{variant}: worker exit codes {codes}\n{logs}")
    stats = [stats_of(p.log_path) for p in procs]
    return {
        "variant": variant,
        "workers": workers,
        "settings": settings,
        "log": log,
        "description": web.description,
        "worker_cpu_s": cpu,
        "worker_wall_s": [e - launched for e in ended],
        "worker_runqueue_wait_s": runq,
        "web_cpu_s": web_cpu,
        "redis_cpu_s": redis_cpu,
        # Everything else the machine ran meanwhile (other people's jobs, this
        # harness, py-spy), in cores: the benchmark shares 2 cores.
        "foreign_cores": (busy - sum(cpu) - (web_cpu or 0) - (redis_cpu or 0)) / wall,
        "system_busy_cores": busy / wall,
        "redis_commandstats": cmdstats,
        "worker_stats": stats,
        "workdir": str(workdir.relative_to(REPO)),
    }


# -- analysis -------------------------------------------------------------------------


def page_records(log: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in log if r.path != "/robots.txt" and r.host_ip != OUT_OF_SCOPE_IP]


def host_records(log: list[RequestRecord]) -> list[RequestRecord]:
    """Every request a host of the web served, robots.txt included: its delay covers all."""
    return [r for r in log if r.host_ip != OUT_OF_SCOPE_IP]


def rates(pages: list[RequestRecord]) -> dict[str, float]:
    """Whole-run rate and the steady rate over the middle 80 % of requests (by start)."""
    n = len(pages)
    first = min(r.start for r in pages)
    last = max(r.end for r in pages)
    starts = sorted(r.start for r in pages)
    lo, hi = int(0.1 * n), int(0.9 * n)
    span = starts[hi] - starts[lo] if hi > lo else 0.0
    return {
        "pages": n,
        "duration_s": last - first,
        "pages_per_s": n / (last - first) if last > first else 0.0,
        "steady_window_s": span,
        "steady_pages_per_s": (hi - lo) / span if span > 0 else 0.0,
    }


def host_gaps(pages: list[RequestRecord]) -> tuple[list[float], list[float]]:
    """All consecutive same-host (start-to-start gaps, end-to-next-start idles)."""
    by_host: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in pages:
        by_host[r.host_ip].append(r)
    gaps, idles = [], []
    for recs in by_host.values():
        recs.sort(key=lambda r: r.start)
        for a, b in pairwise(recs):
            gaps.append(b.start - a.start)
            idles.append(b.start - a.end)
    return gaps, idles


def host_gap_report(
    pages: list[RequestRecord], delay: float, latency_s: dict[str, float]
) -> dict[str, Any]:
    """How long each host waited between its fetches, against its delay.

    ``idle``: from the end of one fetch of a host to the start of its next (the
    frontier's delay runs from the end of a fetch: the gap the delay governs,
    whose target is delay + 0.1 s); ``start``: start to start. Percentiles over
    every consecutive pair of every host, and the worst host's own p99. The
    run's end against the ideal: every host fetched back to back, ``delay``
    after each answer (its pages x latency + (pages - 1) x delay, from the
    run's first request), the slowest host setting the end."""
    by_host: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in pages:
        by_host[r.host_ip].append(r)
    starts: list[float] = []
    idles: list[float] = []
    worst_p99: tuple[float, str] | None = None
    ideal_end = 0.0
    for host, recs in by_host.items():
        recs.sort(key=lambda r: r.start)
        own = [b.start - a.end for a, b in pairwise(recs)]
        starts += [b.start - a.start for a, b in pairwise(recs)]
        idles += own
        if own:
            p99 = pct(own, 0.99) or 0.0
            if worst_p99 is None or p99 > worst_p99[0]:
                worst_p99 = (p99, host)
        latency = latency_s.get(host, 0.0)
        ideal_end = max(ideal_end, len(recs) * latency + (len(recs) - 1) * delay)
    first = min(r.start for r in pages)
    last = max(r.end for r in pages)
    target = delay + 0.1
    return {
        "samples": len(idles),
        "idle_p50_s": pct(idles, 0.5),
        "idle_p99_s": pct(idles, 0.99),
        "idle_max_s": max(idles, default=None),
        "worst_host_idle_p99_s": worst_p99[0] if worst_p99 else None,
        "worst_host": worst_p99[1] if worst_p99 else None,
        "start_gap_p50_s": pct(starts, 0.5),
        "start_gap_p99_s": pct(starts, 0.99),
        "target_s": target,
        "idle_over_target": sum(x > target for x in idles),
        "idle_over_1_5s": sum(x > 1.5 for x in idles),
        "idle_over_2s": sum(x > 2.0 for x in idles),
        "end_s": last - first,
        "ideal_end_s": ideal_end,
        "end_vs_ideal": (last - first) / ideal_end if ideal_end else None,
    }


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def analyse(run: dict[str, Any], delay: float) -> dict[str, Any]:
    log = run["log"]
    pages = page_records(log)
    out = rates(pages)
    counts = fetch_counts(pages)
    expected = set(run["description"]["expected_urls"])
    out.update(
        unique_urls=len(counts),
        duplicate_fetches=sum(n - 1 for n in counts.values()),
        missing_urls=len(expected - set(counts)),
        unexpected_urls=len(set(counts) - expected),
        out_of_scope_requests=sum(r.host_ip == OUT_OF_SCOPE_IP for r in log),
        robots_requests=sum(r.path == "/robots.txt" for r in log),
        non_200=sum(r.status != 200 for r in pages),
    )
    report = politeness_report(host_records(log), delay)  # robots.txt fetches included
    gaps, idles = host_gaps(pages)
    out["politeness"] = {
        "max_in_flight_per_host": max(p.max_in_flight for p in report.values()),
        "hosts_over_1_in_flight": sum(p.max_in_flight > 1 for p in report.values()),
        "gaps_below_delay": sum(p.gaps_below_delay for p in report.values()),
        "min_start_gap_s": min(
            (p.min_gap for p in report.values() if p.min_gap is not None), default=None
        ),
        "idle_below_delay": sum(p.idle_below_delay for p in report.values()),
        "min_idle_s": min(
            (p.min_idle for p in report.values() if p.min_idle is not None), default=None
        ),
        "gaps": len(gaps),
        "median_start_gap_s": pct(gaps, 0.5),
        "median_idle_s": pct(idles, 0.5),
        "p90_idle_s": pct(idles, 0.9),
    }
    cpu = sum(run["worker_cpu_s"])
    out["cpu"] = {
        "workers_s": run["worker_cpu_s"],
        "web_s": run["web_cpu_s"],
        "redis_s": run["redis_cpu_s"],
        "foreign_cores": run["foreign_cores"],
        "worker_runqueue_wait_s": run["worker_runqueue_wait_s"],
        # Neither on a CPU nor waiting for one: waiting for I/O or timers.
        "worker_idle_s": [
            wall - c - (q or 0)
            for wall, c, q in zip(
                run["worker_wall_s"],
                run["worker_cpu_s"],
                run["worker_runqueue_wait_s"],
                strict=True,
            )
        ],
        "system_busy_cores": run["system_busy_cores"],
        "worker_ms_per_page": 1000 * cpu / len(pages) if pages else None,
    }
    out["worker_wall_s"] = run["worker_wall_s"]
    keep = (
        "frontier/claims",
        "item_scraped_count",
        "response_received_count",
        "frontier/seen_hits",
        "scheduler/enqueued/redis",
        "dupefilter/filtered",
        "downloader/request_count",
    )
    out["worker_stats"] = [{k: s[k] for k in keep if k in s} for s in run["worker_stats"]]
    if run["redis_commandstats"]:
        out["redis_calls_per_page"] = {
            k: round(v["calls"] / len(pages), 3)
            for k, v in sorted(run["redis_commandstats"].items(), key=lambda kv: -kv[1]["calls"])
            if v["calls"] / len(pages) >= 0.01
        }
        # redis-server's own CPU (commandstats usec would count a script's inner calls twice).
        if run["redis_cpu_s"] is not None:
            out["redis_cpu_us_per_page"] = round(1e6 * run["redis_cpu_s"] / len(pages), 1)
    return out


def ideals(description: dict[str, Any], delay: float) -> dict[str, float]:
    lat = description["latency_s"]
    return {
        "nominal": len(lat) / delay,
        # Our delay starts when a fetch ends: a host gives at most 1/(delay + latency).
        "latency_adjusted": sum(1 / (delay + s) for s in lat.values()),
        "mean_latency_s": statistics.fmean(lat.values()),
    }


# -- part A ----------------------------------------------------------------------------


def delay_plan(cfg: dict[str, Any]) -> list[tuple[str, str, int, dict[str, Any]]]:
    delay = cfg["delay"]
    frontier = {
        "CRAWL_HOST_DELAY": delay,
        "CRAWL_IDLE_CLOSE_SECONDS": cfg["idle_close"],
        "CONCURRENT_REQUESTS": cfg["frontier_concurrency"],
        "LOG_LEVEL": "INFO",
    }
    scrapy_delay = {
        "DOWNLOAD_DELAY": delay,
        "DOWNLOAD_DELAY_JITTER": 0,  # RANDOMIZE_DOWNLOAD_DELAY is deprecated in 2.19
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CONCURRENT_REQUESTS": cfg["baseline_concurrency"],
        "LOG_LEVEL": "INFO",
    }
    redis_baseline = {
        **scrapy_delay,
        "SCHEDULER_PERSIST": True,
        "BASELINE_IDLE_CLOSE_SECONDS": cfg["idle_close"] + 1,
    }
    plan = [(f"frontier-{n}w", "frontier", n, frontier) for n in cfg["frontier_workers"]]
    n = cfg["redis_workers"]
    plan.append((f"scrapy-redis-{n}w", "scrapy-redis", n, redis_baseline))
    plan.append(("plain-scrapy-1w", "plain", 1, {**PLAIN_SCRAPY, **scrapy_delay}))
    return plan


def delay_run(
    cfg: dict[str, Any],
    name: str,
    variant: str,
    workers: int,
    settings: dict[str, Any],
    code_root: Path | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    delay = cfg["delay"]
    t = time.monotonic()
    run = run_crawl(
        RESULTS / "crawl_rate" / "delay" / name,
        cfg["web"],
        variant,
        workers,
        settings,
        # The web farm's hosts also serve redirects, 404s and robots.txt: ~1.4 x the pages.
        timeout=120 + (6 if cfg.get("farm") == "web" else 4) * cfg["web"]["pages"] * delay,
        code_root=code_root,
    )
    res = analyse(run, delay)
    ideal = ideals(run["description"], delay)
    res["host_gaps"] = host_gap_report(
        host_records(run["log"]), delay, run["description"]["latency_s"]
    )
    res.update(name=name, variant=variant, workers=workers, settings=settings, ideal=ideal)
    res["harness_s"] = time.monotonic() - t
    for key in ("pages_per_s", "steady_pages_per_s"):
        res[f"{key}_vs_nominal"] = res[key] / ideal["nominal"]
        res[f"{key}_vs_latency_adjusted"] = res[key] / ideal["latency_adjusted"]
    return res, run


def part_delay(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Our frontier with 1, 2 and 4 workers, then the baselines. With --revs only our
    frontier runs, once per revision in each round (the baselines are not what changed)."""
    cfg = delay_config(args.quick, args.farm, args.delay_size)
    if args.delay_workers:
        cfg["frontier_workers"] = args.delay_workers
    runs: list[dict[str, Any]] = []
    out["delay_bound"] = {"config": cfg, "runs": runs}
    several = len(args.code) > 1
    for i, rev, root in rounds(args.code, args.delay_repeats):
        for base, variant, workers, settings in delay_plan(cfg):
            if (several or args.no_baselines) and variant != "frontier":
                continue
            name = run_name(rev, base, i if args.delay_repeats > 1 else None)
            print(f"[delay-bound] {name} ...", flush=True)
            res = delay_run(cfg, name, variant, workers, settings, code_root=root)[0]
            res.update(rev=rev, round=i + 1)
            runs.append(res)
            save(out, args)
    if several:
        by_rev = {
            rev: {
                f"frontier-{n}w": statistics.median(
                    r["pages_per_s"]
                    for r in runs
                    if (r["rev"], r["variant"], r["workers"]) == (rev, "frontier", n)
                )
                for n in cfg["frontier_workers"]
            }
            for rev, _ in args.code
        }
        out["delay_bound"]["median_pages_per_s_by_rev"] = by_rev
        out["delay_bound"]["median_idle_p99_s_by_rev"] = {
            rev: {
                f"frontier-{n}w": statistics.median(
                    r["host_gaps"]["idle_p99_s"]
                    for r in runs
                    if (r["rev"], r["variant"], r["workers"]) == (rev, "frontier", n)
                )
                for n in cfg["frontier_workers"]
            }
            for rev, _ in args.code
        }
        out["delay_bound"]["vs_baseline"] = compare_revs(
            by_rev,
            {
                f"frontier-{n}w pages/s": itemgetter(f"frontier-{n}w")
                for n in cfg["frontier_workers"]
            },
        )
    save(out, args)
    print_delay(out["delay_bound"])


def table_head(runs: list[dict[str, Any]], minimum: int, columns: str) -> int:
    """Prints a table's header (a run column at least ``minimum`` wide, then
    ``columns``) and its rule; returns the run column's width."""
    width = max(minimum, *(len(r["name"]) + 2 for r in runs))
    head = f"{'run':<{width}}{columns}"
    print(head)
    print("-" * len(head))
    return width


def print_delay(section: dict[str, Any]) -> None:
    cfg, runs = section["config"], section["runs"]
    ideal = runs[0]["ideal"]
    w = cfg["web"]
    print(
        f"\nA. Delay-bound, {cfg.get('farm', 'plain')} farm: {w['hosts']} hosts x {w['pages']} "
        "pages, latency "
        f"{w['latency_ms'][0]}-{w['latency_ms'][1]} ms, delay {cfg['delay']} s; ideal "
        f"{ideal['nominal']:.1f} pages/s nominal, {ideal['latency_adjusted']:.1f} latency-adjusted "
        f"(mean latency {1000 * ideal['mean_latency_s']:.0f} ms)"
    )
    width = table_head(
        runs,
        16,
        f"{'pages':>6}{'secs':>6}{'p/s':>7}{'/nom':>6}{'/adj':>6}"
        f"{'steady':>7}{'/nom':>6}{'/adj':>6}{'inflt':>6}{'gap<d':>6}{'idle<d':>7}"
        f"{'min gap':>8}{'med idle':>9}{'dup':>4}{'miss':>5}{'CPU ms/p':>9}{'runq s':>7}"
        f"{'other cores':>12}",
    )
    for r in runs:
        p = r["politeness"]
        print(
            f"{r['name']:<{width}}{r['pages']:>6}{r['duration_s']:>6.1f}{r['pages_per_s']:>7.1f}"
            f"{r['pages_per_s_vs_nominal']:>6.2f}{r['pages_per_s_vs_latency_adjusted']:>6.2f}"
            f"{r['steady_pages_per_s']:>7.1f}{r['steady_pages_per_s_vs_nominal']:>6.2f}"
            f"{r['steady_pages_per_s_vs_latency_adjusted']:>6.2f}"
            f"{p['max_in_flight_per_host']:>6}{p['gaps_below_delay']:>6}{p['idle_below_delay']:>7}"
            f"{p['min_start_gap_s']:>8.3f}{p['median_idle_s']:>9.3f}"
            f"{r['duplicate_fetches']:>4}{r['missing_urls']:>5}"
            f"{r['cpu']['worker_ms_per_page']:>9.2f}"
            f"{sum(q or 0 for q in r['cpu']['worker_runqueue_wait_s']):>7.1f}"
            f"{r['cpu']['foreign_cores']:>12.2f}"
        )
    print(
        f"\nOne host's consecutive fetches (idle: end -> next start, the gap the delay "
        f"governs; target p99 <= delay + 0.1 s = {cfg['delay'] + 0.1:.2f} s; end: last "
        "request's end against every host fetched back to back)"
    )
    width = table_head(
        runs,
        16,
        f"{'idle p50':>9}{'p99':>7}{'max':>7}{'worst host p99':>15}{'>target':>8}{'>1.5 s':>7}"
        f"{'>2 s':>6}"
        f"{'start p50':>10}{'p99':>7}{'end s':>7}{'ideal s':>8}{'end/ideal':>10}",
    )
    for r in runs:
        g = r.get("host_gaps")
        if not g or g["idle_p50_s"] is None:
            continue
        print(
            f"{r['name']:<{width}}{g['idle_p50_s']:>9.3f}{g['idle_p99_s']:>7.3f}"
            f"{g['idle_max_s']:>7.3f}{g['worst_host_idle_p99_s']:>15.3f}"
            f"{g['idle_over_target']:>8}{g.get('idle_over_1_5s', 0):>7}{g['idle_over_2s']:>6}"
            f"{g['start_gap_p50_s']:>10.3f}"
            f"{g['start_gap_p99_s']:>7.3f}{g['end_s']:>7.1f}{g['ideal_end_s']:>8.1f}"
            f"{g['end_vs_ideal']:>10.3f}"
        )
    for rev, medians in section.get("median_pages_per_s_by_rev", {}).items():
        parts = ", ".join(f"{name} {rate:.1f}" for name, rate in medians.items())
        print(f"{rev}: median pages/s {parts}")
    for rev, medians in section.get("median_idle_p99_s_by_rev", {}).items():
        parts = ", ".join(f"{name} {v:.3f}" for name, v in medians.items())
        print(f"{rev}: median idle p99 (s) {parts}")
    print_vs_baseline(section)


# -- part A, diagnosis: where the time between two fetches of a host goes ----------------


def part_trace(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Delay-bound frontier run(s) with bench/crawl_trace.py: the per-fetch chain."""
    cfg = delay_config(args.quick, args.farm, args.delay_size)
    section: dict[str, Any] = {"config": cfg, "runs": []}
    out["delay_trace"] = section
    plan = delay_plan(cfg)
    for workers in args.trace_workers:
        name, variant, _, settings = plan[0]
        name = f"trace-frontier-{workers}w"
        settings = {
            **settings,
            "EXTENSIONS": {"bench.crawl_trace.FrontierTrace": 0},
            "CRAWL_TRACE_PATH": "{dir}/trace-{i}.jsonl",
        }
        print(f"[delay-bound trace] {name} ...", flush=True)
        res, run = delay_run(cfg, name, variant, workers, settings)
        workdir = REPO / run["workdir"]
        res["chain"] = trace_chain(run["log"], workdir, workers, cfg["delay"])
        section["runs"].append(res)
        save(out, args)
    print_trace(section)


def trace_chain(
    log: list[RequestRecord], workdir: Path, workers: int, delay: float
) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    reached: dict[str, float] = {}
    popped: dict[str, float] = {}  # the engine took it from the scheduler
    received: dict[str, tuple[float, str | None]] = {}
    lags = []
    for i in range(workers):
        with open(workdir / f"trace-{i}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                ev = json.loads(line)
                if ev["k"] == "call":
                    ev["worker"] = i
                    calls.append(ev)
                elif ev["k"] == "sig":
                    url = ev["url"].split("#", 1)[0]
                    if ev["s"] == "reached":
                        reached.setdefault(url, ev["t"])
                    elif ev["s"] == "popped":
                        popped.setdefault(url, ev["t"])
                    else:
                        received.setdefault(url, (ev["t"], ev["token"]))
                elif ev["k"] == "lag":
                    lags.append({k: v for k, v in ev.items() if k != "over_20ms"})
                    lags[-1]["n_over_20ms"] = len(ev["over_20ms"])
    # A slot is freed by a release call, or by the ack when the ack got there first
    # (the scheduler folds a pending release into the ack: one call instead of two).
    released: dict[str, tuple[float, float]] = {}
    freed_by_ack: set[str] = set()
    claimed: dict[str, tuple[float, float]] = {}
    for ev in sorted(calls, key=lambda e: e["t0"]):
        for tok in ev.get("tokens", ()):
            if ev["op"] in ("release", "ack") and tok not in released:
                released[tok] = (ev["t0"], ev["t1"])
                if ev["op"] == "ack":
                    freed_by_ack.add(tok)
            elif ev["op"] == "claim":
                claimed.setdefault(tok, (ev["t0"], ev["t1"]))
    token_of_url = {url: tok for url, (_, tok) in received.items()}
    claim_starts = sorted(ev["t0"] for ev in calls if ev["op"] == "claim")
    # Late pairs (the next claim over 100 ms after the host's delay) during
    # which claims went on (any worker's) without it: the host was not due in
    # Redis yet, its release set a longer wait (the adaptive delay, a penalty).
    not_due_meanwhile = 0
    parts: dict[str, list[float]] = defaultdict(list)
    by_host: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in page_records(log):
        by_host[r.host_ip].append(r)
    for recs in by_host.values():
        recs.sort(key=lambda r: r.start)
        for a, b in pairwise(recs):
            ta, tb = token_of_url.get(a.url), token_of_url.get(b.url)
            if not (ta and tb and ta in released and tb in claimed and b.url in reached):
                parts["unmatched"].append(1)
                continue
            rel0, rel1 = released[ta]
            cl0, cl1 = claimed[tb]
            ready = (rel0 + rel1) / 2 + delay  # Redis stamps the release inside the call
            parts["1 server end -> response_received"].append(received[a.url][0] - a.end)
            parts["2 response_received -> release/ack call"].append(rel0 - received[a.url][0])
            parts["3 release/ack round trip"].append(rel1 - rel0)
            parts["4 host ready -> claim call"].append(cl0 - ready)
            parts["5 claim round trip"].append(cl1 - cl0)
            parts["6 claimed -> reached downloader"].append(reached[b.url] - cl1)
            if b.url in popped:
                parts["6a claimed -> engine took it"].append(popped[b.url] - cl1)
                parts["6b engine took it -> reached downloader"].append(
                    reached[b.url] - popped[b.url]
                )
            parts["7 reached downloader -> server start"].append(b.start - reached[b.url])
            parts["= excess idle (start - prev end - delay)"].append(b.start - a.end - delay)
            if cl0 - ready > 0.1:
                i = bisect.bisect_right(claim_starts, ready + 0.05)
                not_due_meanwhile += i < len(claim_starts) and claim_starts[i] < cl0
    ops: dict[str, list[float]] = defaultdict(list)
    for ev in calls:
        ops[ev["op"]].append(ev["t1"] - ev["t0"])
    summary: dict[str, Any] = {
        "pairs": len(parts.get("= excess idle (start - prev end - delay)", []))
    }
    summary["unmatched"] = len(parts.pop("unmatched", []))
    steps = parts.get("4 host ready -> claim call", [])
    summary["claimed_over_100ms_late"] = sum(x > 0.1 for x in steps)
    summary["late_not_due_in_redis"] = not_due_meanwhile
    summary["slots_freed_by_ack"] = len(freed_by_ack)
    summary["slots_freed"] = len(released)
    summary["components_ms"] = {
        k: {
            "mean": 1000 * statistics.fmean(v),
            "p50": 1000 * (pct(v, 0.5) or 0),
            "p90": 1000 * (pct(v, 0.9) or 0),
            "p99": 1000 * (pct(v, 0.99) or 0),
            "max": 1000 * max(v),
        }
        for k, v in sorted(parts.items())
    }
    # The pairs whose excess idle is over 100 ms: which step took the time.
    excess = parts.get("= excess idle (start - prev end - delay)", [])
    late = [i for i, x in enumerate(excess) if x > 0.1]
    summary["late_pairs"] = len(late)
    summary["late_components_ms"] = {
        k: 1000 * statistics.fmean(v[i] for i in late)
        for k, v in sorted(parts.items())
        if late and len(v) == len(excess)
    }
    summary["calls"] = {
        op: {"n": len(v), "p50_ms": 1000 * (pct(v, 0.5) or 0), "p90_ms": 1000 * (pct(v, 0.9) or 0)}
        for op, v in sorted(ops.items())
    }
    claims = [ev for ev in calls if ev["op"] == "claim"]
    summary["claims"] = {
        "calls": len(claims),
        "empty": sum(not ev["tokens"] for ev in claims),
        "urls": sum(len(ev["tokens"]) for ev in claims),
    }
    summary["loop_lag_s"] = lags
    return summary


def print_trace(section: dict[str, Any]) -> None:
    for r in section["runs"]:
        c = r["chain"]
        print(
            f"\n{r['name']}: {r['pages']} pages, {r['pages_per_s']:.1f} pages/s "
            f"({r['pages_per_s_vs_nominal']:.2f} nominal), other cores "
            f"{r['cpu']['foreign_cores']:.2f}; {c['pairs']} same-host fetch pairs "
            f"({c['unmatched']} unmatched); slots freed by the ack call: "
            f"{c.get('slots_freed_by_ack')} of {c.get('slots_freed')}"
        )
        print(
            f"  {'between two fetches of one host':<44}{'mean':>8}{'p50':>8}{'p90':>8}"
            f"{'p99':>8}{'max':>8}{'late':>8}  (ms; late: mean over the "
            f"{c.get('late_pairs', 0)} pairs over 100 ms late)"
        )
        late = c.get("late_components_ms", {})
        for k, v in c["components_ms"].items():
            print(
                f"  {k:<44}{v['mean']:>8.1f}{v['p50']:>8.1f}{v['p90']:>8.1f}"
                f"{v.get('p99', 0):>8.1f}{v.get('max', 0):>8.1f}{late.get(k, 0):>8.1f}"
            )
        calls = ", ".join(
            f"{op} {v['n']} (p50 {v['p50_ms']:.1f} ms, p90 {v['p90_ms']:.1f})"
            for op, v in c["calls"].items()
        )
        print(
            f"  claimed over 100 ms after the host's delay: {c.get('claimed_over_100ms_late')}; "
            f"of them, while other claims went on (not due in Redis yet: a longer wait set "
            f"at release, e.g. the adaptive delay): {c.get('late_not_due_in_redis')}"
        )
        print(f"  frontier calls: {calls}")
        print(f"  claims: {c['claims']}")
        for i, lag in enumerate(c["loop_lag_s"]):
            print(
                f"  worker {i} event-loop lag (10 ms ticks): p50 {1000 * lag['p50']:.1f} ms, "
                f"p90 {1000 * lag['p90']:.1f}, p99 {1000 * lag['p99']:.1f}, "
                f"max {1000 * lag['max']:.0f}; {lag['n_over_20ms']} of {lag['samples']} > 20 ms"
            )


# -- part B ------------------------------------------------------------------------------


def cpu_sides(cfg: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    common = {"CONCURRENT_REQUESTS": cfg["concurrency"], "LOG_LEVEL": "INFO"}
    frontier = {**common, "CRAWL_HOST_DELAY": 0, "CRAWL_IDLE_CLOSE_SECONDS": cfg["idle_close"]}
    # plain: pip's Scrapy alone in its own venv (bench/plain_project), not this project
    # with parts turned off (issue 43); "project" was that anchor until then.
    return {"frontier": ("frontier", frontier), "plain": ("scrapy", common)}


def rounds(code: list[tuple[str, Path]], repeats: int) -> list[tuple[int, str, Path]]:
    """(round, revision label, code root) in run order: with several revisions A B in
    the first round, B A in the next, ..., so none always runs first while the
    machine's load drifts."""
    return [
        (i, label, root)
        for i in range(repeats)
        for label, root in (code if i % 2 == 0 else code[::-1])
    ]


def run_name(rev: str, base: str, i: int | None) -> str:
    """``frontier-2`` for one revision, ``1cb6f38/frontier-2`` when comparing several."""
    return f"{rev + '/' if rev else ''}{base}{'' if i is None else f'-{i + 1}'}"


def cpu_summary(runs: list[dict[str, Any]], sides: list[str]) -> dict[str, Any]:
    """Each side's medians over its runs, and the frontier ÷ plain ratio of the medians."""

    def median(side: str, get: Any) -> float:
        return statistics.median(get(r) for r in runs if r["side"] == side)

    med = {side: median(side, lambda r: r["pages_per_s"]) for side in sides}
    return {
        "median_pages_per_s": med,
        "median_worker_cpu_ms_per_page": {
            side: median(side, lambda r: r["cpu"]["worker_ms_per_page"]) for side in sides
        },
        "median_worker_cpu_utilisation": {
            side: median(side, lambda r: r["cpu"]["workers_s"][0] / r["worker_wall_s"][0])
            for side in sides
        },
        "ratio_frontier_to_plain": med["frontier"] / med["plain"],
    }


def part_cpu(args: argparse.Namespace, out: dict[str, Any]) -> None:
    cfg = cpu_config(args.quick)
    sides = cpu_sides(cfg)
    runs: list[dict[str, Any]] = []
    out["cpu_bound"] = {"config": cfg, "runs": runs}
    for i, rev, root in rounds(args.code, args.repeats):
        for side, (variant, settings) in sides.items():  # A B A B ...
            name = run_name(rev, side, i)
            print(f"[cpu-bound] {name} ...", flush=True)
            workdir = RESULTS / "crawl_rate" / "cpu" / name
            # 10,250 pages: ~40 s on a quiet machine; at load 15-24 (2026-12-07) over 600 s.
            run = run_crawl(workdir, cfg["web"], variant, 1, settings, 1800, code_root=root)
            res = analyse(run, 0.0)
            res.update(name=name, side=side, rev=rev, variant=variant, settings=settings)
            runs.append(res)
            print(
                f"    {res['pages']} pages, {res['pages_per_s']:.1f} pages/s, worker CPU "
                f"{res['cpu']['worker_ms_per_page']:.2f} ms/page, other cores "
                f"{res['cpu']['foreign_cores']:.2f}",
                flush=True,
            )
            save(out, args)
    if len(args.code) == 1:
        out["cpu_bound"].update(cpu_summary(runs, list(sides)))
    else:
        by_rev = {
            rev: cpu_summary([r for r in runs if r["rev"] == rev], list(sides))
            for rev, _ in args.code
        }
        out["cpu_bound"]["by_rev"] = by_rev
        out["cpu_bound"]["vs_baseline"] = compare_revs(
            by_rev,
            {
                "frontier pages/s": lambda s: s["median_pages_per_s"]["frontier"],
                "plain pages/s": lambda s: s["median_pages_per_s"]["plain"],
                "ratio frontier/plain": lambda s: s["ratio_frontier_to_plain"],
                "frontier CPU ms/page": lambda s: s["median_worker_cpu_ms_per_page"]["frontier"],
            },
        )
    save(out, args)
    print_cpu(out["cpu_bound"])


def compare_revs(by_rev: dict[str, Any], figures: dict[str, Any]) -> dict[str, Any]:
    """Each later revision's figure ÷ the first revision's (the baseline), per figure."""
    (base, base_summary), *others = by_rev.items()
    return {
        rev: {name: get(summary) / get(base_summary) for name, get in figures.items()}
        for rev, summary in others
    } | {"baseline": base}


def print_cpu(section: dict[str, Any]) -> None:
    cfg, runs = section["config"], section["runs"]
    w = cfg["web"]
    print(
        f"\nB. CPU-bound: {w['hosts']} hosts x {w['pages']} pages, latency "
        f"{w['latency_ms'][0]}-{w['latency_ms'][1]} ms, no delay, CONCURRENT_REQUESTS "
        f"{cfg['concurrency']}, 1 process each"
    )
    width = table_head(
        runs,
        12,
        f"{'pages':>7}{'secs':>7}{'p/s':>8}{'steady':>8}{'CPU s':>7}"
        f"{'ms/page':>8}{'CPU use':>8}{'runq s':>7}{'idle s':>7}{'web CPU':>8}{'redis CPU':>10}"
        f"{'other cores':>12}{'inflt':>6}{'dup':>4}{'miss':>5}",
    )
    for r in runs:
        c = r["cpu"]
        redis_cpu = c["redis_s"] if c["redis_s"] is not None else float("nan")
        print(
            f"{r['name']:<{width}}{r['pages']:>7}{r['duration_s']:>7.1f}{r['pages_per_s']:>8.1f}"
            f"{r['steady_pages_per_s']:>8.1f}{sum(c['workers_s']):>7.1f}"
            f"{c['worker_ms_per_page']:>8.2f}{c['workers_s'][0] / r['worker_wall_s'][0]:>8.0%}"
            f"{c['worker_runqueue_wait_s'][0] or 0:>7.1f}{c['worker_idle_s'][0]:>7.1f}"
            f"{c['web_s'] or 0:>8.1f}{redis_cpu:>10.1f}{c['foreign_cores']:>12.2f}"
            f"{r['politeness']['max_in_flight_per_host']:>6}"
            f"{r['duplicate_fetches']:>4}{r['missing_urls']:>5}"
        )
    for rev, summary in section.get("by_rev", {"": section}).items():
        med = summary["median_pages_per_s"]
        cpu = summary["median_worker_cpu_ms_per_page"]
        print(
            f"{rev + ': ' if rev else ''}median pages/s: frontier {med['frontier']:.1f}, "
            f"plain Scrapy {med['plain']:.1f}; ratio {summary['ratio_frontier_to_plain']:.3f} "
            f"(target >= 1.0); median worker CPU ms/page: frontier {cpu['frontier']:.2f}, "
            f"plain {cpu['plain']:.2f}"
        )
    print_vs_baseline(section)


def print_vs_baseline(section: dict[str, Any]) -> None:
    """With --revs: each revision's medians ÷ the baseline revision's, same run."""
    if "vs_baseline" not in section:
        return
    vs = dict(section["vs_baseline"])
    base = vs.pop("baseline")
    for rev, figures in vs.items():
        parts = ", ".join(f"{name} {ratio:.3f}" for name, ratio in figures.items())
        print(f"{rev} / {base} (medians, same run): {parts}")


# -- part B, diagnosis: py-spy ------------------------------------------------------------

CATEGORIES = (  # (label, substring of a frame's file); a sample counts once per label
    ("spider parse (spiders/web.py)", "/spiders/web.py"),
    ("LinkExtractor", "/scrapy/linkextractors/"),
    ("lxml/parsel (html parse, css)", "/parsel/"),
    ("frontier scheduler (crawlproject/frontier)", "/crawlproject/frontier/"),
    ("  frontier URL canonicalize/fingerprint", "/crawlproject/frontier/basics/urls.py"),
    ("  frontier request JSON codec", "/crawlproject/frontier/store/codec.py"),
    ("  frontier Redis calls (redis_frontier.py)", "/frontier/store/redis_frontier.py"),
    ("  known links (middlewares/known_links.py)", "/middlewares/known_links.py"),
    ("redis-py (redis/)", "/site-packages/redis/"),
    ("duplicate filter (middlewares/dedupe.py)", "/middlewares/dedupe.py"),
    ("  SimHash text and fingerprint", "/crawlproject/dedupe/fingerprint.py"),
    ("robots.txt (middlewares/robotstxt.py)", "/middlewares/robotstxt.py"),
    ("WARC store pipeline (pipelines/store.py)", "/pipelines/store.py"),
    ("Scrapy scheduler + dupefilter", "/scrapy/core/scheduler.py"),
    ("  RFPDupeFilter / fingerprint", "/scrapy/dupefilters.py"),
    ("Scrapy HTTP/1.1 download handler", "/scrapy/core/downloader/handlers/http11.py"),
    ("Scrapy downloader middlewares", "/scrapy/core/downloader/middleware.py"),
    ("Twisted HTTP client (twisted/web)", "/site-packages/twisted/web/"),
)


def frame_package(frame: str) -> str:
    """Where a (shortened) py-spy frame's code lives: a package, a stdlib module, or ours."""
    file = frame.rsplit("(", 1)[-1].rsplit(":", 1)[0]
    if file.startswith("<frozen"):
        return "import machinery"
    if "/lib/python3" in file and "site-packages" not in file:
        return "stdlib " + file.split("/lib/python3", 1)[1].split("/", 2)[1].removesuffix(".py")
    parts = file.split("/")
    if parts[0] in ("crawlproject", "spiders", "middlewares", "bench"):
        return "/".join(parts[:2]) if parts[0] == "crawlproject" else parts[0]
    return parts[0].removesuffix(".py") if len(parts) > 1 else "(native / thread root)"


def summarise_profile(path: Path, top: int = 25) -> dict[str, Any]:
    """py-spy raw (collapsed stacks) of the main thread: inclusive share by category, top self."""
    total = 0
    incl: dict[str, int] = defaultdict(int)
    self_time: dict[str, int] = defaultdict(int)
    by_package: dict[str, int] = defaultdict(int)
    by_project_file: dict[str, int] = defaultdict(int)
    lines = path.read_text(errors="replace").splitlines()
    # With --threads the root frame is "thread (TID)[: NAME]": keep the reactor's thread
    # (Scrapy's other threads mostly wait, and py-spy cannot always tell waiting).
    main = next(
        (ln.split(")", 1)[0] for ln in lines if ln.split(";", 1)[0].endswith("MainThread")), None
    )
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        if main is not None and stack.split(")", 1)[0] != main:
            continue
        n = int(count)
        total += n
        for label, needle in CATEGORIES:
            if needle in stack:
                incl[label] += n
        frame = stack.rsplit(";", 1)[-1]
        for prefix in (f"{sys.prefix}/lib/python3.11/site-packages/", f"{CODE_ROOT}/", f"{REPO}/"):
            frame = frame.replace(prefix, "")
        self_time[frame] += n
        by_package[frame_package(frame)] += n
        by_project_file[deepest_project_file(stack)] += n
    return {
        "samples": total,
        "inclusive_share": {label: incl[label] / total for label, _ in CATEGORIES if total},
        "self_by_package": [
            (pkg, n / total) for pkg, n in sorted(by_package.items(), key=lambda kv: -kv[1])
        ],
        "top_self": [
            (frame, n / total) for frame, n in sorted(self_time.items(), key=lambda kv: -kv[1])
        ][:top],
        "by_project_file": [
            (file, n / total) for file, n in sorted(by_project_file.items(), key=lambda kv: -kv[1])
        ][:top],
    }


PROJECT_DIRS = ("crawlproject/", "spiders/", "middlewares/", "pipelines/")
ROOT_FRAME = "crawlproject/commands/crawl.py"  # `scrapy crawl`: every sample's root


def deepest_project_file(stack: str) -> str:
    """The project file of a sample's deepest project frame: the time a module spends
    in its own code and in the libraries it calls, without the project code it drives.
    (A spider middleware's inclusive share holds the spider's whole parse, which runs
    inside its async generator; this one does not.) ``(Scrapy, Twisted, asyncio)``:
    no project frame below the root."""
    for frame in reversed(stack.split(";")):
        file = frame.rsplit("(", 1)[-1].rsplit(":", 1)[0]
        for root in (f"{CODE_ROOT}/", f"{REPO}/"):
            if file.startswith(root):
                file = file.removeprefix(root)
                break
        else:
            continue
        if file.startswith(PROJECT_DIRS) and file != ROOT_FRAME:
            return file
    return "(Scrapy, Twisted, asyncio)"


def part_trace_cpu(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """CPU-bound, one run per side with bench/crawl_trace.py: how often the downloader is
    empty (the worker waits for work) and what the frontier's claims look like."""
    cfg = cpu_config(args.quick)
    section: dict[str, Any] = {"config": cfg, "sides": {}}
    out["cpu_trace"] = section
    for side, (variant, settings) in cpu_sides(cfg).items():
        print(f"[cpu-bound trace] {side} ...", flush=True)
        settings = {
            **settings,
            "EXTENSIONS": {"bench.crawl_trace.FrontierTrace": 0},
            "CRAWL_TRACE_PATH": "{dir}/trace-{i}.jsonl",
        }
        workdir = RESULTS / "crawl_rate" / "trace-cpu" / side
        run = run_crawl(workdir, cfg["web"], variant, 1, settings, timeout=900)
        res = analyse(run, 0.0)
        section["sides"][side] = {
            "pages_per_s": res["pages_per_s"],
            "cpu": res["cpu"],
            **downloader_occupancy(workdir / "trace-0.jsonl"),
        }
        save(out, args)
    for side, r in section["sides"].items():
        print(
            f"\n{side}: {r['pages_per_s']:.1f} pages/s; downloader empty "
            f"{r['empty_share']:.1%} of the crawl ({r['empty_s']:.1f} s), mean occupancy "
            f"{r['mean_occupancy']:.1f}; loop lag p50 {1000 * r['lag']['p50']:.1f} ms, p99 "
            f"{1000 * r['lag']['p99']:.1f} ms"
        )
        if r.get("claims"):
            print(f"  frontier calls: {r['calls']}; claims {r['claims']}")


def downloader_occupancy(path: Path) -> dict[str, Any]:
    """From a crawl_trace file: requests between reaching the downloader and their response."""
    steps: list[tuple[float, int]] = []
    calls: dict[str, list[float]] = defaultdict(list)
    claims = {"calls": 0, "empty": 0, "urls": 0}
    lag: dict[str, Any] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            ev = json.loads(line)
            if ev["k"] == "sig":
                steps.append((ev["t"], 1 if ev["s"] == "reached" else -1))
            elif ev["k"] == "call":
                calls[ev["op"]].append(ev["t1"] - ev["t0"])
                if ev["op"] == "claim":
                    claims["calls"] += 1
                    claims["empty"] += not ev["tokens"]
                    claims["urls"] += len(ev["tokens"])
            elif ev["k"] == "lag":
                lag = {k: v for k, v in ev.items() if k != "over_20ms"}
    steps.sort()
    level, empty, area = 0, 0.0, 0.0
    for (t, step), (t_next, _) in pairwise(steps):
        level += step
        empty += (t_next - t) if level <= 0 else 0.0
        area += max(level, 0) * (t_next - t)
    span = steps[-1][0] - steps[0][0] if len(steps) > 1 else 0.0
    return {
        "span_s": span,
        "empty_s": empty,
        "empty_share": empty / span if span else 0.0,
        "mean_occupancy": area / span if span else 0.0,
        "lag": lag,
        "calls": {
            op: f"{len(v)} x p50 {1000 * (pct(v, 0.5) or 0):.1f} ms" for op, v in calls.items()
        },
        "claims": claims if claims["calls"] else None,
    }


def part_profile(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """One CPU-bound run per side under py-spy (100 Hz); not timed, not in the medians."""
    cfg = cpu_config(args.quick)
    section: dict[str, Any] = {"config": cfg, "sides": {}}
    out["cpu_profile"] = section
    for side, (variant, settings) in cpu_sides(cfg).items():
        dest = RESULTS / f"crawl_rate-profile-{side}{'-quick' if args.quick else ''}.txt"
        print(f"[cpu-bound profile] {side} ...", flush=True)
        workdir = RESULTS / "crawl_rate" / "profile" / side
        run = run_crawl(workdir, cfg["web"], variant, 1, settings, 900, profile=f"raw:{dest}")
        res = analyse(run, 0.0)
        prof = summarise_profile(dest)
        prof.update(
            file=str(dest.relative_to(REPO)),
            pages_per_s_under_pyspy=res["pages_per_s"],
            worker_cpu_ms_per_page=res["cpu"]["worker_ms_per_page"],
        )
        section["sides"][side] = prof
        save(out, args)
    print_profile(section)


def print_profile(section: dict[str, Any]) -> None:
    sides = section["sides"]
    names = list(sides)
    print("\nB. CPU profile (py-spy, share of the worker's on-CPU samples, inclusive)")
    print(f"{'':<46}" + "".join(f"{n:>10}" for n in names))
    for label, _ in CATEGORIES:
        print(
            f"{label:<46}" + "".join(f"{sides[n]['inclusive_share'][label]:>10.1%}" for n in names)
        )
    print("\nself time by package (the innermost frame's code)")
    shares = {n: dict(sides[n]["self_by_package"]) for n in names}
    pkgs = sorted(
        {p for n in names for p in shares[n]},
        key=lambda p: -max(shares[n].get(p, 0) for n in names),
    )
    for pkg in pkgs[:18]:
        print(f"  {pkg:<44}" + "".join(f"{shares[n].get(pkg, 0):>10.1%}" for n in names))
    print("\nby project file, deepest project frame (its own code and the libraries it calls)")
    files = {n: dict(sides[n].get("by_project_file", [])) for n in names}
    ranked = sorted(
        {f for n in names for f in files[n]}, key=lambda f: -max(files[n].get(f, 0) for n in names)
    )
    for file in ranked[:18]:
        print(f"  {file:<44}" + "".join(f"{files[n].get(file, 0):>10.1%}" for n in names))
    for n in names:
        print(f"\n{n}: {sides[n]['samples']} samples; top self frames:")
        for frame, share in sides[n]["top_self"][:15]:
            print(f"  {share:6.1%}  {frame}")


# -- main ---------------------------------------------------------------------------------


def save(out: dict[str, Any], args: argparse.Namespace) -> None:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, default=str))
    tmp.replace(args.out)


def run_record() -> dict[str, Any]:
    """What a result file starts with: the command, the date, the machine and its
    load (add ``loadavg_at_end`` to ``machine`` when done)."""
    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_at_start": os.getloadavg(),
        },
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--part",
        choices=("all", "delay", "cpu", "trace", "trace-cpu", "profile", "address"),
        default="all",
        help="all = delay + cpu (the benchmark); trace and profile are diagnostics",
    )
    ap.add_argument("--quick", action="store_true", help="small webs: check the script works")
    ap.add_argument(
        "--rev",
        default="HEAD",
        help="git revision whose crawlproject/spiders/middlewares the workers run (default HEAD)",
    )
    ap.add_argument(
        "--live", action="store_true", help="run the working tree as it is instead of --rev"
    )
    ap.add_argument(
        "--code-dir",
        type=Path,
        help="run the project code in this directory (an export changed for an experiment)",
    )
    ap.add_argument(
        "--revs",
        metavar="BASE,REV[,REV...]",
        help="compare revisions in one run (delay, cpu): each round runs every revision, "
        "order alternating; medians per revision and their ratio to the first",
    )
    ap.add_argument("--repeats", type=int, default=3, help="CPU-bound runs per side (>= 2)")
    ap.add_argument(
        "--delay-repeats", type=int, default=1, help="delay-bound rounds (with --revs: >= 2)"
    )
    ap.add_argument(
        "--delay-workers",
        type=int,
        nargs="+",
        metavar="N",
        help="delay-bound: our frontier's worker counts (default 1 2 4)",
    )
    ap.add_argument(
        "--farm",
        choices=("web", "plain"),
        default="web",
        help="delay, trace: web = robots.txt Crawl-delay and Disallow, mirrors, redirects, "
        "404s (testkit/web_like.py); plain = pages linking pages, as before issue 43",
    )
    ap.add_argument(
        "--delay-size",
        type=lambda v: tuple(int(x) for x in v.split("x")),
        metavar="HOSTSxPAGES",
        help="delay, trace: another web size (a diagnosis on a loaded machine: 20x15)",
    )
    ap.add_argument("--no-baselines", action="store_true", help="delay: our frontier only")
    ap.add_argument(
        "--trace-workers", type=int, nargs="+", default=[1], help="trace: worker counts to run"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra Scrapy setting for every worker of every run (experiments)",
    )
    ap.add_argument(
        "--address-repeats", type=int, default=2, help="--part address: rounds of cap on/off"
    )
    ap.add_argument(
        "--address-spread-repeats", type=int, default=1,
        help="--part address: runs of 200 names on 10 addresses",
    )  # fmt: skip
    ap.add_argument("--out", type=Path, help="default bench/results/crawl_rate[-PART].json")
    args = ap.parse_args(argv)
    revs = args.revs is not None
    if revs and args.live:
        ap.error("--revs runs exports of commits; --live runs the working tree: not both")
    if revs and args.part not in ("all", "delay", "cpu"):
        ap.error("--revs compares the benchmark parts (all, delay, cpu), not the diagnostics")
    for item in args.set:
        name, _, value = item.partition("=")
        EXTRA_SETTINGS[name] = value
    shown = args.out  # printed as given: it may lie outside the repository
    if args.out is not None:
        args.out = args.out.resolve()
    if args.out is None:
        suffix = "" if args.part in ("all", "delay", "cpu") else f"-{args.part}"
        suffix += "-set" if args.set else ""  # experiments never overwrite the benchmark
        suffix += "-revs" if revs else ""
        args.out = RESULTS / f"crawl_rate{suffix}{'-quick' if args.quick else ''}.json"
    out: dict[str, Any] = {
        **run_record(),
        "quick": args.quick,
        "extra_settings": EXTRA_SETTINGS,
    }
    if revs:
        try:
            exports = export_revs(args.revs)
        except ValueError as exc:
            ap.error(str(exc))
        args.code = [(label, root) for label, root, _ in exports]
        out["code"] = {"revs": [info for _, _, info in exports], "baseline": args.code[0][0]}
    elif args.code_dir:
        global CODE_ROOT
        CODE_ROOT = args.code_dir.resolve()
        out["code"] = {"code_dir": str(CODE_ROOT)}
        args.code = [("", CODE_ROOT)]
    else:
        out["code"] = {"live_working_tree": str(REPO)} if args.live else snapshot_code(args.rev)
        args.code = [("", CODE_ROOT)]
    with contextlib.suppress(ImportError):
        import redis
        import scrapy
        import scrapy_redis

        out["versions"] = {
            "scrapy": scrapy.__version__,
            "redis-py": redis.__version__,
            "scrapy-redis": scrapy_redis.__version__,
        }
    t = time.monotonic()
    if args.part in ("all", "delay"):
        part_delay(args, out)
    if args.part in ("all", "cpu"):
        part_cpu(args, out)
    if args.part == "trace":
        part_trace(args, out)
    if args.part == "trace-cpu":
        part_trace_cpu(args, out)
    if args.part == "profile":
        part_profile(args, out)
    if args.part == "address":
        from address_rate import part_address  # it imports this module

        part_address(args, out)
    out["total_s"] = time.monotonic() - t
    out["machine"]["loadavg_at_end"] = os.getloadavg()
    save(out, args)
    if "delay_bound" in out and args.part == "all":
        print_delay(out["delay_bound"])
    print(f"\nwrote {shown or args.out.relative_to(REPO)} ({out['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
