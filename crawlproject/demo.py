"""``./run demo``: crawl a small synthetic web on loopback with the embedded default.

Serves 5 hosts (127.0.3.1-5) of 20 pages each from the repository's test web,
runs ``scrapy crawl web`` on them with no ``REDIS_URL`` (so a private Redis is
started in ``crawl-data/demo``), and prints what was fetched and whether each
host was treated politely, judged from the web server's own request log.
Run from a checkout (it uses ``testkit/testweb.py``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

DEMO_DELAY_SECONDS = 0.25
# Host 1 keeps its /p/1... pages (/p/1, /p/10-/p/19) away from crawlers.
DEMO_ROBOTS = "User-agent: *\nDisallow: /p/1\n"


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from testkit.testweb import WebProcess, page_counts, politeness_report

    data = root / "crawl-data" / "demo"
    shutil.rmtree(data, ignore_errors=True)  # each demo crawls a fresh web on a new port
    data.mkdir(parents=True)
    options = {
        "hosts": 5, "pages": 20, "latency_ms": "5-30", "links": 4, "cross_links": 1,
        "special": {1: {"/robots.txt": {"body": DEMO_ROBOTS}}},
    }  # fmt: skip
    with WebProcess(data / "web", options) as web:
        host1 = web.seeds[0].rstrip("/")

        def allowed(url: str) -> bool:
            return not url.startswith(host1 + "/p/1")

        expected = web.reachable_urls(allowed)
        print(
            f"demo web: {len(web.seeds)} hosts, {len(web.expected_urls)} pages, "
            f"{len(expected)} of them allowed by robots.txt"
        )
        cmd = [
            sys.executable, "-m", "scrapy", "crawl", "web",
            "-a", "seeds=" + ",".join(web.seeds),
            "-s", f"CRAWL_DATA_DIR={data}",
            "-s", f"CRAWL_HOST_DELAY={DEMO_DELAY_SECONDS}",
            "-s", "CRAWL_IDLE_CLOSE_SECONDS=2",
            # The demo web is on loopback, which the private-address guard refuses.
            "-s", "CRAWL_GUARD_ALLOW=127.0.0.0/8",
            "-s", "LOG_LEVEL=INFO",
            "-O", str(data / "pages.jsonl"),
        ]  # fmt: skip
        code = subprocess.call(cmd, cwd=root)
        log = web.stop()
    fetched = page_counts(log)
    robots = sum(r.path == "/robots.txt" for r in log)
    forbidden = [u for u in fetched if not allowed(u)]
    report = politeness_report(log, DEMO_DELAY_SECONDS)
    items = [json.loads(line) for line in (data / "pages.jsonl").read_text().splitlines()]
    print()
    print(
        f"pages fetched:  {len(fetched)} of {len(expected)} allowed (each once: "
        f"{all(n == 1 for n in fetched.values())}); disallowed fetched: {len(forbidden)}"
    )
    print(f"robots.txt:     {robots} fetch(es) for {len(web.seeds)} hosts")  # fmt: skip
    # The demo web serves /p/N?a=1&b=2 with /p/N's content: exact duplicates, dropped.
    print(f"items written:  {len(items)} -> {data / 'pages.jsonl'} "
          f"({len(fetched) - len(items)} duplicate pages dropped)")  # fmt: skip
    worst_gap = min((p.min_idle for p in report.values() if p.min_idle is not None), default=0.0)
    in_flight = max((p.max_in_flight for p in report.values()), default=0)
    print(f"politeness:     max {in_flight} request(s) in flight per host; shortest pause")
    pause = f"{worst_gap:.3f} s, delay {DEMO_DELAY_SECONDS} s"
    print(f"                between fetches of a host {pause}")
    stored = sum(1 for i in items if i.get("warc_file"))
    warcs = sorted((data / "bodies").rglob("*.warc.gz"))
    print(f"page bodies:    {stored} pages in {len(warcs)} WARC file(s) under {data / 'bodies'}")
    if stored:
        example = next(str(i["final_url"]) for i in items if i.get("warc_file"))
        print(f"                e.g. crawlproject -s CRAWL_DATA_DIR={data} body {example}")
    print(f"frontier data:  {data / 'redis'} (embedded Redis, append-only file)")
    return code


if __name__ == "__main__":
    sys.exit(main())
