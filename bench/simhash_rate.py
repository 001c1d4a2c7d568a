"""Fingerprints per second per core: crawlproject.dedupe.fingerprint vs the simhash package.

Corpus: ``testkit.pages.make_pages`` (the tests' synthetic site, seeded,
so every run fingerprints the same pages): ``--docs`` pages (300) of ~10 KB of
text each (a 9-10 KB body plus the ~0.8 KB site template), in two forms: the
plain text and the HTML page (head, styles, scripts, svg, comments, nav).

Workloads, each over all the pages, single process, pinned to CPU 0 when the
OS allows (``os.sched_setaffinity``; the report says whether it was):

* ``ours, text``: ``simhash64(normalise(text))``: the target is >= 2,500 docs/s.
* ``simhash package, text``: ``simhash.Simhash(text)`` with its defaults (md5
  feature hash); ``OverflowError`` (numpy 2, upstream issue #74: a feature
  weight > 255) is caught and counted.
* ``ours, page``: ``page_fingerprint(html)``: visible_text + normalise +
  simhash64 on the HTML form (features version 2: the text without the page's
  nav, header and footer).
* ``v1 page``: the same with features version 1 (all the visible text:
  ``visible_text(html, keep_boilerplate=True)``), as fingerprinted until
  version 2: the per-page cost version 2 must not exceed.
* ``tree, v1`` / ``tree, v2``: ``text_fingerprint(visible_text_of_tree(root))``
  on the already parsed page (parsel's tree), as the dedupe middleware calls it:
  the per-page cost in the crawler, parse excluded.
* ``before``: the page and tree paths as the code was until features version 2
  (``fingerprint.py`` as of 4ed7d7d: ``strip_elements`` / an ``ancestor::`` XPath per text node,
  all visible text), copied here: the figures version 2 must not fall below.
* stages of ``ours, page`` alone: ``visible_text(html)``, ``normalise(text)``,
  ``simhash64(normalised)``.

Each workload runs ``--repeats`` times (3; the workloads interleaved within a
repeat), each run as many passes over the corpus as last >= ``--min-run-s``
(1 s; calibrated on a warm-up pass), and the median run is reported: docs/s,
and MB/s of the input it reads
(UTF-8 bytes of the text, or of the HTML for page and visible_text). By
default the script first waits (up to 10 min, polling every 30 s) until the
1-minute load average is below 1.0, and reports the load before and after.

    .venv/bin/python bench/simhash_rate.py
    .venv/bin/python bench/simhash_rate.py --quick  # 60 docs, 1 repeat, 0.2 s runs, no wait

Writes bench/results/simhash_rate.json (-quick.json with --quick) and prints
a Markdown table with the command line that produced it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import simhash
from benchlib import REPO, write_result  # also puts the repository on sys.path
from lxml import etree

from crawlproject.dedupe.fingerprint import (
    FEATURES_VERSION,
    normalise,
    page_fingerprint,
    simhash64,
    text_fingerprint,
    visible_text,
    visible_text_of_tree,
)
from testkit.pages import make_pages

# As parsel parses a response (what the middleware's tree is): comments kept.
_TREE_PARSER = etree.HTMLParser(encoding="utf-8", huge_tree=True)

# The text paths as they were until features version 2 (fingerprint.py of 4ed7d7d), kept
# here so that one run measures before and after on the same machine state.
_INVISIBLE = ("script", "style", "noscript", "template", "svg", "head")
_TITLE = etree.XPath("string(/html/head/title)", smart_strings=False)
_TEXT = etree.XPath("//text()", smart_strings=False)
_VISIBLE_TEXT = etree.XPath(
    "//text()[not(ancestor::" + " or ancestor::".join(_INVISIBLE) + ")]", smart_strings=False
)
_PAGE_PARSER = etree.HTMLParser(
    encoding="utf-8", remove_comments=True, remove_pis=True, huge_tree=True, no_network=True
)


def page_before(html: str) -> tuple[int, int]:
    """page_fingerprint until version 2: parse, strip the invisible, all text."""
    root = etree.fromstring(html.encode("utf-8", "replace"), _PAGE_PARSER)
    title = str(_TITLE(root))
    etree.strip_elements(root, *_INVISIBLE, with_tail=False)
    return text_fingerprint(" ".join(f"{title} {' '.join(_TEXT(root))}".split()))


def tree_before(root: Any) -> tuple[int, int]:
    """The middleware's fingerprint until version 2: an ancestor:: XPath per text node."""
    text = f"{_TITLE(root)} {' '.join(_VISIBLE_TEXT(root))}"
    return text_fingerprint(" ".join(text.split()))


TARGET_DOCS_PER_S = 2500
QUIET_LOAD = 1.0
QUIET_WORDS = {True: "quiet", False: "NOT quiet: gave up waiting", None: "did not wait"}


def load_average() -> tuple[float, float, float]:
    one, five, fifteen = Path("/proc/loadavg").read_text().split()[:3]
    return float(one), float(five), float(fifteen)


def wait_until_quiet(max_wait_s: float, poll_s: float = 30.0) -> dict[str, Any]:
    """Poll the 1-minute load average until it is below QUIET_LOAD (or give up)."""
    start = time.monotonic()
    seen = []
    while True:
        load = load_average()
        seen.append(load[0])
        waited = time.monotonic() - start
        if load[0] < QUIET_LOAD:
            return {"quiet": True, "waited_s": round(waited), "loads_seen": seen}
        if waited + poll_s > max_wait_s:
            return {"quiet": False, "waited_s": round(waited), "loads_seen": seen}
        print(f"load {load[0]:.2f} >= {QUIET_LOAD}: waiting {poll_s:.0f} s", flush=True)
        time.sleep(poll_s)


def pin_to_one_core() -> str:
    try:
        os.sched_setaffinity(0, {0})
    except (AttributeError, OSError) as exc:
        return f"not pinned ({exc.__class__.__name__})"
    return f"pinned to CPU {sorted(os.sched_getaffinity(0))}"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def package_simhash(texts: list[str]) -> int:
    """simhash.Simhash on each text; returns the number of OverflowErrors."""
    overflows = 0
    for text in texts:
        try:
            simhash.Simhash(text)
        except OverflowError:
            overflows += 1
    return overflows


def run(args: argparse.Namespace) -> dict[str, Any]:
    pages = make_pages(args.docs, seed=args.seed, min_chars=9000, max_chars=10000)
    texts = [p.text() for p in pages]
    htmls = [p.html() for p in pages]
    normalised = [normalise(t) for t in texts]
    trees = [etree.fromstring(h.encode(), _TREE_PARSER) for h in htmls]
    text_mb = sum(len(t.encode()) for t in texts) / 1e6
    html_mb = sum(len(h.encode()) for h in htmls) / 1e6

    workloads: dict[str, tuple[Callable[[], object], float]] = {
        "ours, text: simhash64(normalise(text))": (
            lambda: [simhash64(normalise(t)) for t in texts],
            text_mb,
        ),
        "simhash package, text: Simhash(text)": (lambda: package_simhash(texts), text_mb),
        "ours, page: page_fingerprint(html)": (
            lambda: [page_fingerprint(h) for h in htmls],
            html_mb,
        ),
        "before (4ed7d7d), page: page_fingerprint(html), all visible text": (
            lambda: [page_before(h) for h in htmls],
            html_mb,
        ),
        "before (4ed7d7d), tree: the middleware's visible_text_of_tree + text_fingerprint": (
            lambda: [tree_before(r) for r in trees],
            html_mb,
        ),
        "v1 page: simhash64(normalise(visible_text(html, keep_boilerplate=True)))": (
            lambda: [simhash64(normalise(visible_text(h, keep_boilerplate=True))) for h in htmls],
            html_mb,
        ),
        "tree, v1: text_fingerprint(visible_text_of_tree(root, keep_boilerplate=True))": (
            lambda: [
                text_fingerprint(visible_text_of_tree(r, keep_boilerplate=True)) for r in trees
            ],
            html_mb,
        ),
        "tree, v2: text_fingerprint(visible_text_of_tree(root))": (
            lambda: [text_fingerprint(visible_text_of_tree(r)) for r in trees],
            html_mb,
        ),
        "stage: visible_text(html)": (lambda: [visible_text(h) for h in htmls], html_mb),
        "stage: normalise(text)": (lambda: [normalise(t) for t in texts], text_mb),
        "stage: simhash64(normalised)": (lambda: [simhash64(n) for n in normalised], text_mb),
    }
    # warm-up (caches, the package's regex compile), then passes over the corpus
    # per run so that every timed run lasts >= --min-run-s
    overflow_errors = 0
    passes: dict[str, int] = {}
    for name, (work, _mb) in workloads.items():
        start = time.perf_counter()
        out = work()
        once = time.perf_counter() - start
        passes[name] = max(1, math.ceil(args.min_run_s / once))
        if name.startswith("simhash package"):
            overflow_errors = int(str(out))

    seconds: dict[str, list[float]] = {name: [] for name in workloads}
    for _ in range(args.repeats):
        for name, (work, _mb) in workloads.items():
            start = time.perf_counter()
            for _ in range(passes[name]):
                work()
            seconds[name].append((time.perf_counter() - start) / passes[name])

    rows = []
    for name, (_work, mb) in workloads.items():
        median_s = statistics.median(seconds[name])
        rows.append(
            {
                "workload": name,
                "passes_per_run": passes[name],
                "seconds_per_pass": [round(s, 4) for s in seconds[name]],
                "median_s_per_pass": round(median_s, 4),
                "docs_per_s": round(len(pages) / median_s, 1),
                # The best run: on a loaded machine, the nearest to the code's own cost.
                "best_docs_per_s": round(len(pages) / min(seconds[name]), 1),
                "mb_per_s": round(mb / median_s, 2),
                "input_mb": round(mb, 3),
            }
        )
    by_name = {r["workload"]: r for r in rows}
    ours = by_name["ours, text: simhash64(normalise(text))"]["docs_per_s"]
    package = by_name["simhash package, text: Simhash(text)"]["docs_per_s"]
    return {
        "docs": len(pages),
        "mean_text_bytes": round(text_mb * 1e6 / len(pages)),
        "mean_html_bytes": round(html_mb * 1e6 / len(pages)),
        "repeats": args.repeats,
        "rows": rows,
        "package_overflow_errors": overflow_errors,
        "ratio_ours_over_package": round(ours / package, 1),
        "target_docs_per_s": TARGET_DOCS_PER_S,
        "target_met": ours >= TARGET_DOCS_PER_S,
        "features_version": FEATURES_VERSION,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Fingerprints per second, one core ({report['pinning']}), "
        f"{report['docs']} pages (text {report['mean_text_bytes']:,} B, "
        f"HTML {report['mean_html_bytes']:,} B on average), median of {report['repeats']} runs",
        "",
        "| workload | docs/s (median) | docs/s (best run) | MB/s | s per pass, each run "
        "| passes/run |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for row in report["rows"]:
        runs = ", ".join(f"{s:.4f}" for s in row["seconds_per_pass"])
        lines.append(
            f"| {row['workload']} | {row['docs_per_s']:,.0f} | {row['best_docs_per_s']:,.0f} "
            f"| {row['mb_per_s']:.2f} | {runs} | {row['passes_per_run']} |"
        )
    lines += [
        "",
        f"- ours/package (text): {report['ratio_ours_over_package']}x; "
        f"package OverflowErrors (numpy 2, #74): {report['package_overflow_errors']} "
        f"of {report['docs']} per run",
        f"- target >= {report['target_docs_per_s']:,} docs/s (ours, text): "
        f"{'met' if report['target_met'] else 'NOT met'}",
        f"- load average before {report['load_before']}, after {report['load_after']}; "
        f"waited {report['quiet_wait']['waited_s']} s for 1-min load < {QUIET_LOAD} "
        f"({QUIET_WORDS[report['quiet_wait']['quiet']]})",
        f"- {report['cpu']}; Python {report['python']}, numpy {report['numpy']}, "
        f"simhash {report['simhash']}",
        f"- command: `{report['command']}`",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument(
        "--min-run-s", type=float, default=1.0, help="passes over the corpus per run: >= this"
    )
    parser.add_argument(
        "--quick", action="store_true", help="60 docs, 1 repeat, 0.2 s runs, no wait"
    )
    parser.add_argument("--no-wait", action="store_true", help="do not wait for a quiet machine")
    parser.add_argument("--max-wait", type=float, default=600.0, help="seconds (default 600)")
    args = parser.parse_args()
    if args.quick:
        args.docs, args.repeats, args.no_wait, args.min_run_s = 60, 1, True, 0.2

    command = shlex.join([".venv/bin/python", "bench/simhash_rate.py", *sys.argv[1:]])
    quiet = (
        {"quiet": None, "waited_s": 0, "loads_seen": []}
        if args.no_wait
        else wait_until_quiet(args.max_wait)
    )
    pinning = pin_to_one_core()
    load_before = load_average()
    report = run(args)
    report.update(
        {
            "command": command,
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "pinning": pinning,
            "load_before": load_before,
            "load_after": load_average(),
            "quiet_wait": quiet,
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "simhash": metadata.version("simhash"),
        }
    )
    out = write_result("simhash_rate-quick.json" if args.quick else "simhash_rate.json", report)
    print(markdown(report))
    print(f"\nwrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
