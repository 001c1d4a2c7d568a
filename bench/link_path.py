"""CPU time of a worker's per-page link path, revision against revision.

    .venv/bin/python bench/link_path.py --revs 75b7329,7999c38 [--pages 2000] [--rounds 5]

The pages of bench/crawl_rate.py's CPU-bound farm (250 hosts x 40 pages,
2 KB bodies, seed 2: testkit/testweb.py renders them here, no server); for
each page what the ``web`` spider does with its links: the HTML processor's
title and links (pipelines/content/html.py, Scrapy's LinkExtractor) and each
link's scope root (spiders/scope.py). Each revision runs in a process of its
own importing that revision's export (bench/crawl_rate.py's export_code),
rounds alternating (A B, B A, ...); the figure is the process CPU time
(``time.process_time``) per page of each round, its median per revision and
the ratio to the first. CPU time, not wall-clock: it holds on a loaded machine
better than a crawl's pages/s (not exactly: a contended core runs slower).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHILD = r"""
import json, sys, time
from scrapy.http import HtmlResponse
from pipelines.content.html import HtmlProcessor
from spiders.scope import scope_root_of
from testkit.testweb import TestWeb

pages = int(sys.argv[1])
web = TestWeb(hosts=250, pages=40, latency_ms=(0, 2), body_bytes=2048, seed=2)
base = "http://127.0.3.{}:8000/"
bodies = []
for n in range(pages):
    h, k = n % 250 + 1, (n // 250) % 40
    url = base.format(h) + ("" if k == 0 else f"p/{k}")
    bodies.append((url, web.render(h, k)))
processor = HtmlProcessor()
links = 0
t0 = time.process_time()
for url, body in bodies:
    response = HtmlResponse(url, body=body, encoding="utf-8")
    result = processor.process(response)
    for link in result.links:
        scope_root_of(link, "hosts")
        links += 1
spent = time.process_time() - t0
print(json.dumps({"us_per_page": 1e6 * spent / pages, "links_per_page": links / pages}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--revs", required=True, help="BASE,REV[,...]: revisions to compare")
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "bench"))
    from crawl_rate import export_revs

    exports = [(label, root) for label, root, _ in export_revs(args.revs)]
    per: dict[str, list[float]] = {label: [] for label, _ in exports}
    links: dict[str, float] = {}
    for i in range(args.rounds):
        for label, root in exports if i % 2 == 0 else exports[::-1]:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)])}
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(args.pages)],
                env=env,
                cwd=root,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            got = json.loads(out.strip().splitlines()[-1])
            per[label].append(got["us_per_page"])
            links[label] = got["links_per_page"]
            print(f"round {i + 1} {label}: {got['us_per_page']:.1f} us/page", flush=True)
    base = exports[0][0]
    for label, values in per.items():
        med = statistics.median(values)
        print(
            f"{label}: median {med:.1f} us/page ({', '.join(f'{v:.1f}' for v in values)}), "
            f"{links[label]:.2f} links/page, / {base}: {med / statistics.median(per[base]):.3f}"
        )


if __name__ == "__main__":
    main()
