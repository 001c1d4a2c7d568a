"""robots.txt obeyed by a fleet of 3 real workers against a web of robots.txt edge cases.

Everything is judged from the test web's own request log: what was fetched,
how often, and when.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from urllib.parse import urlsplit

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import RequestRecord, TestWeb, page_counts, politeness_report

DELAY = 0.1
CRAWL_DELAY = 0.3
RETRY_AFTER = 2
SETTINGS = {
    "CRAWL_HOST_DELAY": DELAY,
    "CRAWL_IDLE_CLOSE_SECONDS": 2,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "CRAWL_ROBOTS_RETRY_SECONDS": 1,
    "CRAWL_ROBOTS_DEFER_RETRIES": 2,
    "LOG_LEVEL": "INFO",
}
RULES = """\
User-agent: *
Disallow: /

User-agent: crawlproject
Disallow: /p/
Allow: /p/1
Allow: /p/3$
Allow: /p/5
Disallow: /p/5
Disallow: /*?
"""
ORPHANS = ["/orphan/1", "/orphan/2", "/orphan/3"]
SITEMAP_FILES = ["/sitemap_index.xml", "/sm1.xml.gz", "/sm2.xml.gz"]


def urlset(paths: list[str]) -> str:
    entries = "".join(
        f"<url><loc>{{base}}{p}</loc><lastmod>2026-11-0{i + 1}</lastmod></url>"
        for i, p in enumerate(paths)
    )
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'


def build_special() -> dict[int, dict[str, dict[str, object]]]:
    padding = "".join(f"# padding line {i:06d} " + "x" * 80 + "\n" for i in range(6500))
    big = "User-agent: *\nDisallow: /p/3\n" + padding + "Disallow: /p/4\n"
    assert 600 * 1024 <= len(big.encode()) <= 700 * 1024
    index = (
        '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<sitemap><loc>{base}/sm1.xml.gz</loc></sitemap>"
        "<sitemap><loc>{base}/sm2.xml.gz</loc></sitemap></sitemapindex>"
    )
    orphan = {"content_type": "text/html", "body": "<html><title>orphan</title></html>"}
    gz = {"content_type": "application/x-gzip", "gzip": True}
    return {
        1: {"/robots.txt": {"body": RULES}},
        2: {"/robots.txt": {"body": f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n"}},
        # 3: no robots.txt (404): everything allowed
        4: {"/robots.txt": {"status": 500, "body": "oops"}},
        5: {"/robots.txt": {"status": 503, "body": ""}},
        6: {"/robots.txt": {"reset": True}},
        7: {
            "/robots.txt": {"status": 301, "headers": {"Location": "{base}/real-robots.txt"}},
            "/real-robots.txt": {"body": "User-agent: *\nDisallow: /p/2\n"},
        },
        8: {"/robots.txt": {"body": big}},
        9: {
            "/robots.txt": {"body": "Sitemap: {base}/sitemap_index.xml\n"},
            "/sitemap_index.xml": {"body": index, "content_type": "application/xml"},
            "/sm1.xml.gz": {**gz, "body": urlset(ORPHANS[:2])},
            "/sm2.xml.gz": {**gz, "body": urlset(ORPHANS[2:])},
            **{p: orphan for p in ORPHANS},
        },
        10: {"/p/1": {"status": 429, "headers": {"Retry-After": str(RETRY_AFTER)}, "times": 1}},
        # Six redirects, one more than followed: "unavailable", everything allowed
        # (the robots.txt at the end of the chain would forbid everything).
        11: {
            "/robots.txt": {"status": 301, "headers": {"Location": "{base}/r/1"}},
            **{
                f"/r/{i}": {"status": 302, "headers": {"Location": f"{{base}}/r/{i + 1}"}}
                for i in range(1, 6)
            },
            "/r/6": {"body": "User-agent: *\nDisallow: /\n"},
        },
    }


def allowed_by_hand(web: TestWeb) -> Callable[[str], bool]:
    """The rules above, applied by hand (not by the parser under test)."""

    def allowed(url: str) -> bool:
        parts = urlsplit(url)
        h = web.ips.index(parts.hostname or "") + 1
        path, query = parts.path, parts.query
        if h == 1:
            if path.startswith(("/p/1", "/p/5")):
                return True  # the longest match is an Allow (/p/5: a tie, Allow wins)
            if query:
                return False  # Disallow: /*?
            return path == "/p/3" or not path.startswith("/p/")  # Allow: /p/3$
        if h in (4, 5, 6):
            return False
        if h == 7:
            return not path.startswith("/p/2")
        if h == 8:
            return not path.startswith("/p/3")  # /p/4 comes after the first 500 KiB
        return True

    return allowed


def by_host(log: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    hosts: dict[str, list[RequestRecord]] = {}
    for rec in sorted(log, key=lambda r: r.start):
        hosts.setdefault(rec.host_ip, []).append(rec)
    return hosts


def test_three_workers_obey_robots_txt_edge_cases(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    assert gzip  # the test web gzips the sitemap files itself
    web = testweb_factory(
        hosts=11, pages=8, latency_ms=(2, 8), links=3, cross_links=0, special=build_special()
    )
    procs = [
        start_worker(REPO_ROOT, redis_url, "robots", web.seeds, SETTINGS, tmp_path / f"w{i}.log")
        for i in range(3)
    ]
    wait_all(procs, timeout=180)
    log = list(web.log)
    hosts = by_host(log)
    ip = {h: web.ips[h - 1] for h in range(1, 12)}
    allowed = allowed_by_hand(web)

    # Exactly one robots.txt fetch per host across the 3 workers (the TTL is 24 h),
    # except where it failed: retried once after CRAWL_ROBOTS_RETRY_SECONDS, then given up.
    robots = Counter(r.host_ip for r in log if r.path == "/robots.txt")
    for h in range(1, 12):
        assert robots[ip[h]] == (2 if h in (4, 5, 6) else 1), (h, robots)
    assert Counter(r.path for r in hosts[ip[7]])["/real-robots.txt"] == 1
    chain = [r.path for r in hosts[ip[11]] if r.path == "/robots.txt" or r.path.startswith("/r/")]
    assert chain == ["/robots.txt", "/r/1", "/r/2", "/r/3", "/r/4", "/r/5"]

    # 5xx, 503-empty and connection-reset hosts: nothing but robots.txt, retried with backoff.
    for h in (4, 5, 6):
        recs = hosts[ip[h]]
        assert [r.path for r in recs] == ["/robots.txt", "/robots.txt"], (h, recs)
        assert recs[1].start - recs[0].end >= 1.0

    # Zero fetches of disallowed URLs; every allowed page fetched, once.
    extra = {"/robots.txt", "/real-robots.txt", *SITEMAP_FILES}
    pages = {
        u: n
        for u, n in page_counts(log).items()
        if urlsplit(u).path not in extra and not urlsplit(u).path.startswith("/r/")
    }
    assert [u for u in pages if not allowed(u)] == []
    expected = web.reachable_urls(allowed) | {web.base_url(9) + p[1:] for p in ORPHANS}
    assert set(pages) == expected
    retried = web.base_url(10) + "p/1"  # its 429 was retried
    assert {u: n for u, n in pages.items() if n != 1} == {retried: 2}
    # Not vacuous: on each host with rules, they kept out pages links reach.
    kept_out = web.expected_urls - set(pages)
    for h in (1, 7, 8):
        assert any(urlsplit(u).hostname == ip[h] for u in kept_out), h
    assert web.base_url(8) + "p/3" in kept_out
    assert web.base_url(8) + "p/4" in pages  # its Disallow lies past the first 500 KiB

    # Politeness, robots.txt fetches included: one request at a time per host,
    # CRAWL_HOST_DELAY everywhere, the Crawl-delay on host 2.
    for host, p in politeness_report(log, DELAY).items():
        assert p.max_in_flight <= 1 and p.idle_below_delay == 0, (host, p)
    (h2,) = politeness_report(hosts[ip[2]], CRAWL_DELAY).values()
    assert h2.gaps_below_delay == 0 and h2.requests >= 5, h2
    # Host 10 said "Retry-After: 2" with its 429: left alone for 2 s.
    recs = hosts[ip[10]]
    (i,) = [k for k, r in enumerate(recs) if r.status == 429]
    assert recs[i + 1].start - recs[i].end >= RETRY_AFTER

    stats = [stats_of(p.log_path) for p in procs]
    total = Counter[str]()
    for s in stats:
        total.update(s)
    # Disallowed pages kept out: as links, by the rules each worker holds
    # (middlewares/robots_links.py), or at download when it held none.
    assert total["robotstxt/forbidden_links"] + total["robotstxt/forbidden"] > 0
    assert total["robotstxt/truncated"] == 1
    assert total["robotstxt/redirects_exhausted"] == 1
    assert total["robotstxt/crawl_delay_hosts"] == 1
    assert total["sitemap/urls"] == len(ORPHANS)
    # Hosts 4-6 were set aside after their failed fetches, with their reason;
    # their seeds are parked, not dropped.
    assert "robotstxt/unreachable" not in total
    assert total["robotstxt/parked_hosts"] == 3
    reasons = json.loads(
        subprocess.run(
            [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", "robots",
             "parked", "--reasons"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60,
        ).stdout
    )  # fmt: skip
    expected_reasons = {4: "robots_500", 5: "robots_503", 6: "no_answer"}
    assert {
        h: reasons[key] for h in (4, 5, 6) for key in reasons if key.startswith(ip[h] + ":")
    } == {h: {why: 1} for h, why in expected_reasons.items()}
    assert total["frontier/retry_after"] == 1


def test_one_fetch_per_ttl_while_concurrent_requests_wait(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """Three slots on one slow host, three workers: the first robots.txt fetch is
    awaited by the host's other requests, and it is fetched again once per TTL."""
    ttl = 1.0
    web = testweb_factory(hosts=1, pages=30, latency_ms=300, links=3, cross_links=0)
    settings = {
        **SETTINGS,
        "CRAWL_HOST_CONCURRENCY": 3,
        "CRAWL_ADAPTIVE_DELAY_FACTOR": 0,
        "CRAWL_ROBOTS_TTL_SECONDS": ttl,
    }
    seeds = [web.base_url(1)] + [web.base_url(1) + f"p/{k}" for k in range(1, 30)]
    procs = [
        start_worker(REPO_ROOT, redis_url, "ttl", seeds, settings, tmp_path / f"t{i}.log")
        for i in range(3)
    ]
    wait_all(procs, timeout=120)
    log = sorted(web.log, key=lambda r: r.start)
    robots = [r for r in log if r.path == "/robots.txt"]
    duration = log[-1].end - log[0].start
    assert duration > 2 * ttl  # the test spans several TTLs
    assert 2 <= len(robots) <= duration / ttl + 1, (len(robots), duration)
    # Never two within one TTL (plus the fetch time of the first).
    assert all(b.start - a.start >= ttl for a, b in pairwise(robots))
    # Pages waited for the first robots.txt instead of fetching it again.
    first_page = min(r.start for r in log if r.path != "/robots.txt")
    assert first_page >= robots[0].end
    total = Counter[str]()
    for p in procs:
        total.update(stats_of(p.log_path))
    assert total["robotstxt/waited"] + total["robotstxt/waited_local"] > 0, total
    assert set(page_counts(log)) == web.expected_urls
