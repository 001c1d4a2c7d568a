"""What rendering a page costs: pages/s and CPU per page, rendered against not.

One real ``scrapy crawl web`` worker, a fresh redis-server and crawl per run,
on testkit/js_sites.py's static site served on ``--hosts`` loopback hosts of
``--pages`` pages each (every page has a harmless script, so every page is a
candidate), run alternately with ``CRAWL_RENDER=never`` and ``always``
(``--repeats`` rounds; ``--modes never,always,auto`` adds the default),
``CRAWL_HOST_DELAY=0`` (the hosts' politeness is not
what is measured), the other settings the project's defaults.

* pages/s: pages / (last page request's end - first page request's start),
  from the web's server-side log (the browser's start counts against ``always``);
* CPU per page: user + system CPU of the worker and everything it started
  (Playwright's driver, Chromium's processes: reaped children's rusage),
  over the whole run including start-up, / pages.

Reports each run, the median per side and the ratios: ``.venv/bin/python
bench/render_rate.py`` (alone on the machine: under ``flock /tmp/bench.lock``
where several sessions share it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.js_sites import JsWeb, StaticSite
from testkit.redis_server import RedisServer


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(mode: str, hosts: int, pages: int, out: Path) -> dict[str, float]:
    ips = [f"127.0.46.{i + 1}" for i in range(hosts)]
    sites = {ip: StaticSite(pages=pages) for ip in ips}
    with RedisServer() as redis, JsWeb(sites) as web:  # type: ignore[arg-type]
        settings = {
            "CRAWL_RENDER": mode,
            "CRAWL_HOST_DELAY": 0,
            "CRAWL_IDLE_CLOSE_SECONDS": 1.0,
            "CRAWL_IDLE_POLL_SECONDS": 0.2,
            "CRAWL_DATA_DIR": str(out / "data"),
        }
        cpu = children_cpu()
        proc = start_worker(REPO_ROOT, redis.url, "bench", [web.base_url(ip) + "/" for ip in ips],
                            settings, out / "w.log")  # fmt: skip
        wait_all([proc], timeout=900)
        cpu = children_cpu() - cpu
        page_paths = set(sites[ips[0]].pages())
        log = [r for r in web.log if r.path in page_paths]
    stats = stats_of(out / "w.log")
    span = max(r.end for r in log) - min(r.start for r in log)
    return {
        "pages": len(log),
        "rendered": stats.get("render/pages", 0),
        "pages_per_s": len(log) / span,
        "cpu_ms_per_page": 1000 * cpu / len(log),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--modes", default="never,always", help="CRAWL_RENDER values, in turn")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in args.modes.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for mode in runs:
                out = Path(tmp) / f"{mode}-{i}"
                out.mkdir()
                result = one_run(mode, args.hosts, args.pages, out)
                runs[mode].append(result)
                print(mode, json.dumps({k: round(v, 2) for k, v in result.items()}), flush=True)
    med = {
        mode: {k: statistics.median(r[k] for r in rs) for k in ("pages_per_s", "cpu_ms_per_page")}
        for mode, rs in runs.items()
    }
    print("median", json.dumps(med))
    base = med.get("never")
    for mode, m in med.items():
        if base is not None and mode != "never":
            print(
                f"{mode}/never: pages/s x{m['pages_per_s'] / base['pages_per_s']:.2f}, "
                f"CPU per page x{m['cpu_ms_per_page'] / base['cpu_ms_per_page']:.1f} "
                f"(load {os.getloadavg()[0]:.1f})"
            )


if __name__ == "__main__":
    main()
