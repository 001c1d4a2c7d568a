"""How soon a host is fetched again when it is all there is to fetch: the
your-sites crawl (tests/test_your_spider_your_sites.py) without its shop.

Two ``scrapy crawl web`` workers on one redis-server, seeded with
testkit/own_sites.py's docs site (``--pages``, 12,001 in the test) and its
blog (a listing per 120 docs pages), the test's settings (CRAWL_HOST_DELAY 0,
adaptive delay 0, idle close 2 s, idle poll 0.2 s), every other setting the
default (32 shards). One request in flight per host, so the crawl takes the
docs site's chain of fetches: what counts is the gap between the end of one
of its fetches and the start of the next. From the server's request log:
the run's seconds, per host the gaps' p50/p90/p99 and how many exceed
0.1/0.2/0.4 s, split by whether the same worker fetched both pages or the
other one took over.

    .venv/bin/python bench/host_refetch.py --pages 1500
    # another revision: a worktree, its code first on the path
    git worktree add /tmp/wt-REV REV
    PYTHONPATH=/tmp/wt-REV .venv/bin/python bench/host_refetch.py

(it imports testkit from PYTHONPATH first, and starts the workers from
``testkit.REPO_ROOT``: that worktree's code).
Wrap runs in ``flock /tmp/crawlproject-bench.lock``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

# This checkout's testkit, unless PYTHONPATH names another (a worktree of the
# revision to measure): appended, so PYTHONPATH comes first.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from testkit.crawlproc import REPO_ROOT, start_worker
from testkit.own_sites import BLOG_IP, DOCS_IP, BlogSite, DocsSite
from testkit.own_web import OwnSitesWeb
from testkit.redis_server import RedisServer
from testkit.testweb import RequestRecord

SETTINGS = {
    "CRAWL_HOST_DELAY": 0,
    "CRAWL_ADAPTIVE_DELAY_FACTOR": 0,
    "CRAWL_IDLE_CLOSE_SECONDS": 2,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "LOG_LEVEL": "INFO",
}
OVER = (0.1, 0.2, 0.4)


def gaps(log: list[RequestRecord]) -> dict[str, dict[str, object]]:
    by_host: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for r in log:
        by_host[r.host_ip].append((r.start, r.end, r.headers.get("user-agent", "")))
    out: dict[str, dict[str, object]] = {}
    for host, recs in sorted(by_host.items()):
        recs.sort()
        pairs = [(b[0] - a[1], a[2] == b[2]) for a, b in itertools.pairwise(recs)]
        ordered = sorted(g for g, _ in pairs)

        def q(p: float, ordered: list[float] = ordered) -> float:
            return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 1)

        over: Counter[str] = Counter()
        for g, same in pairs:
            for lo in OVER:
                if g > lo:
                    over[f"{'same' if same else 'other'}_over_{lo}"] += 1
        out[host] = {
            "requests": len(recs),
            "gap_ms_p50_p90_p99": [q(0.5), q(0.9), q(0.99)] if ordered else [],
            "taken_over": sum(1 for _, same in pairs if not same),
            **dict(sorted(over.items())),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=1500, help="docs site pages (test: 12,001)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, help="JSON result (default: printed only)")
    args = ap.parse_args()
    docs = DocsSite(pages_total=args.pages)
    blog = BlogSite(listings=max(1, args.pages // 120))
    with (
        tempfile.TemporaryDirectory(prefix="host-refetch-") as tmp,
        RedisServer() as redis,
        OwnSitesWeb({DOCS_IP: docs, BLOG_IP: blog}) as web,
    ):
        seeds = [web.base_url(DOCS_IP) + "/", web.base_url(BLOG_IP) + "/"]
        start = time.monotonic()
        procs = [
            start_worker(
                REPO_ROOT,
                redis.url,
                None,
                seeds,
                {**SETTINGS, "USER_AGENT": f"w{i}"},
                Path(tmp) / f"w{i}.log",
            )
            for i in range(args.workers)
        ]
        for proc in procs:
            proc.wait(900)
        seconds = time.monotonic() - start
        result = {
            "code": str(REPO_ROOT),
            "pages": args.pages,
            "workers": args.workers,
            "requests": len(web.log),
            "seconds": round(seconds, 1),
            "exit_codes": [p.returncode for p in procs],
            "hosts": gaps(list(web.log)),
        }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
