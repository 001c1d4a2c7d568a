"""WARC bytes stored per page on a recrawl, bodies stored whole again (before
revisit records) against revisit records (CRAWL_STORE_DUPLICATES).

    .venv/bin/python bench/recrawl_bytes.py
    .venv/bin/python bench/recrawl_bytes.py --hosts 2 --pages 10  # quick: a check, ~3 min
    (options: --hosts 10 --pages 50 --changed 0.1)

A test web of realistic pages (testkit/testweb.py ``realistic``) with
validators (ETag, Last-Modified) on --hosts hosts x --pages pages; a real
worker crawls it, ``crawlproject recrawl --all`` makes every page due, a
fraction --changed of the pages change, a second worker recrawls: the
unchanged pages answer 304. Done twice on fresh Redis and data: with
``CRAWL_STORE_DUPLICATES = "full"`` (what was stored before: the changed
pages whole, a 304 nothing) and ``"revisit"`` (the changed pages whole, each
304 a revisit record and its request); and a third time without validators
(every page answers 200 again, same bytes for the unchanged: before, each
stored whole; with revisits, an identical-payload revisit). Bytes: the WARC
files (gzip) each crawl wrote, / pages fetched.

Writes bench/results/recrawl_bytes.json and prints a Markdown summary.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchlib import REPO, write_result  # also puts the repository on sys.path

from testkit.crawlproc import start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb

CRAWL = "rb"
SETTINGS = {
    "CRAWL_HOST_DELAY": 0.0, "CRAWL_IDLE_CLOSE_SECONDS": 2.0, "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "CRAWL_RECRAWL_TRACK": True, "CRAWL_DEDUPE_ENABLED": False, "LOG_LEVEL": "INFO",
}  # fmt: skip


def crawl(
    redis: RedisServer, web: TestWeb, data: Path, log: Path, duplicates: str
) -> dict[str, int]:
    settings = {**SETTINGS, "CRAWL_DATA_DIR": str(data), "CRAWL_STORE_DUPLICATES": duplicates}
    proc = start_worker(REPO, redis.url, CRAWL, web.seeds, settings, log)
    wait_all([proc], timeout=900)
    return stats_of(proc.log_path)


def warc_bytes(warc_dir: Path, before: set[Path]) -> tuple[int, set[Path]]:
    files = set(warc_dir.glob("*.warc.gz"))
    return sum(p.stat().st_size for p in files - before), files


def measure(
    args: argparse.Namespace, duplicates: str, validators: bool, tmp: Path
) -> dict[str, Any]:
    web = TestWeb(
        hosts=args.hosts, pages=args.pages, latency_ms=0, links=3, cross_links=1,
        query_variants=0, realistic=True, validators=validators,
    ).start()  # fmt: skip
    try:
        data = tmp / f"{duplicates}-{validators}"
        warc_dir = data / "bodies" / CRAWL / "warc"
        with RedisServer() as redis:
            crawl(redis, web, data, data / "c1.log", duplicates)
            first, files = warc_bytes(warc_dir, set())
            pages = len(web.expected_urls)
            changed = 0
            for h in range(1, web.hosts + 1):
                for k in range(web.page_count(h)):
                    if (h * 7919 + k) % round(1 / args.changed) == 0:
                        web.change(h, k)
                        changed += 1
            subprocess.run(
                [sys.executable, "-m", "crawlproject", "--redis-url", redis.url, "--crawl", CRAWL,
                 "recrawl", "--all"], cwd=REPO, check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            stats = crawl(redis, web, data, data / "c2.log", duplicates)
            second, _ = warc_bytes(warc_dir, files)
    finally:
        web.stop()
    return {
        "duplicates": duplicates, "validators": validators, "pages": pages, "changed": changed,
        "first_bytes_per_page": round(first / pages, 1),
        "recrawl_bytes_per_page": round(second / pages, 1),
        "recrawl_over_first": round(second / first, 4),
        "not_modified": stats.get("recrawl/not_modified", 0),
        "revisits": {k: v for k, v in stats.items() if k.startswith("store/revisits/")},
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--pages", type=int, default=50)
    ap.add_argument("--changed", type=float, default=0.1)
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="recrawl-bytes-") as tmp:
        for validators in (True, False):
            for duplicates in ("full", "revisit"):
                runs.append(measure(args, duplicates, validators, Path(tmp)))
                print(runs[-1], flush=True)
    command = shlex.join([".venv/bin/python", *sys.argv])
    out = write_result("recrawl_bytes.json", {"command": command, "runs": runs})
    for r in runs:
        print(f"| validators {r['validators']}, {r['duplicates']} | {r['pages']} pages, "
              f"{r['changed']} changed | first {r['first_bytes_per_page']} B/page | recrawl "
              f"**{r['recrawl_bytes_per_page']} B/page** "
              f"({r['recrawl_over_first']:.3f} of the first) |")  # fmt: skip
    print(f"`{command}`; written to {out}")


if __name__ == "__main__":
    main()
