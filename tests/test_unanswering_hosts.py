"""A crawl ends when its work ends (issue 34, item 7): hosts that cannot answer
are tried on a short schedule, then set aside with their reason.

A real worker, a real redis-server and a real loopback web: a seeded site whose
home page links to names that do not resolve and to a loopback address where
nothing listens, whose pages link to a second host whose robots.txt answers
503, and whose last page links to one more name that does not resolve (found
last: its whole retry schedule runs after the last useful fetch). The crawl
must end by itself within ``CRAWL_IDLE_CLOSE_SECONDS`` + 10 s of the last page
the web served (from the web's own log and the worker's exit time), and
``crawlproject parked --reasons`` must name every such host and why.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from crawlproject.robots.policy import FetchOutcome, unreachable_reason
from testkit.crawlproc import REPO_ROOT, crawl_status, start_worker, stats_of, tail
from testkit.testweb import TestWeb

PAGES = 40
DELAY = 0.5  # host 1's pages alone take PAGES * DELAY = 20 s, longer than the retries
IDLE_CLOSE = 10.0  # the default CRAWL_IDLE_CLOSE_SECONDS, said out loud
DEAD_NAMES = ["nx-docs.invalid", "nx-api.invalid"]
LATE_NAME = "nx-late.invalid"  # linked from the chain's last page only: found last
REFUSED = "127.0.2.9:1"  # a loopback address where nothing listens
SETTINGS = {
    "CRAWL_HOST_DELAY": DELAY,
    "CRAWL_IDLE_CLOSE_SECONDS": IDLE_CLOSE,
    "CRAWL_IDLE_POLL_SECONDS": 0.5,
    "LOG_LEVEL": "INFO",
}


def home_page() -> str:
    dead = [f'<a href="http://{name}/guide/{i}">guide</a>' for name in DEAD_NAMES for i in (1, 2)]
    dead.append(f'<a href="http://{REFUSED}/">mirror</a>')
    return f'<html><body><a href="/p/1">next</a> {" ".join(dead)}</body></html>'


def last_page() -> str:
    return f'<html><body><a href="/">home</a> <a href="http://{LATE_NAME}/">late</a></body></html>'


def cli(redis_url: str, crawl: str, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", crawl, *args],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip


def test_unanswering_hosts_are_parked_with_a_reason_and_the_crawl_ends(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    special = {
        1: {
            "/": {"body": home_page(), "content_type": "text/html"},
            f"/p/{PAGES - 1}": {"body": last_page(), "content_type": "text/html"},
        },
        2: {"/robots.txt": {"status": 503, "body": "busy"}},
    }
    web = testweb_factory(
        hosts=2,
        pages=PAGES,
        latency_ms=2,
        links=1,  # a chain: its last page is the crawl's last useful fetch
        cross_links=1,
        query_variants=0,
        special=special,
    )
    proc = start_worker(
        REPO_ROOT,
        redis_url,
        "unanswering",
        [web.base_url(1)],
        SETTINGS,
        tmp_path / "w.log",
        extra_args=["-a", "scope=any"],
    )
    deadline = time.monotonic() + 240
    while proc.poll() is None:
        assert time.monotonic() < deadline, tail(proc.log_path)
        time.sleep(0.05)
    exited = time.time()
    assert proc.returncode == 0, tail(proc.log_path)

    log = list(web.log)
    host1, host2 = web.ips[0], web.ips[1]
    useful = [r for r in log if r.status == 200]
    assert {r.host_ip for r in useful} == {host1}
    # Every page of host 1 was fetched (its home and its chain of PAGES - 1).
    assert len({r.path for r in useful if r.path != "/robots.txt"}) == PAGES
    last = max(useful, key=lambda r: r.end)
    assert last.path == f"/p/{PAGES - 1}"  # the page that links to LATE_NAME
    last_useful = last.end
    # Host 2 was only ever asked for robots.txt, a bounded number of times.
    robots2 = [r for r in log if r.host_ip == host2]
    assert {r.path for r in robots2} == {"/robots.txt"}
    assert 1 <= len(robots2) <= 3, robots2
    took = exited - last_useful
    print(f"ended {took:.1f} s after the last useful fetch")
    assert took <= IDLE_CLOSE + 10, (took, tail(proc.log_path))

    reasons = json.loads(cli(redis_url, "unanswering", "parked", "--reasons"))
    by_reason = {host: set(why) for host, why in reasons.items()}
    for name in [*DEAD_NAMES, LATE_NAME]:
        assert by_reason.get(name) == {"dns"}, reasons
    (refused,) = [h for h in reasons if "127.0.2.9" in h]
    assert by_reason[refused] == {"connection_refused"}, reasons
    (busy,) = [h for h in reasons if host2 in h]
    assert by_reason[busy] == {"robots_503"}, reasons
    assert len(reasons) == len(DEAD_NAMES) + 3, reasons

    # Counted, not lost: every URL of those hosts is parked, and requeueable.
    parked = json.loads(cli(redis_url, "unanswering", "parked"))
    assert {h: parked[h] for h in DEAD_NAMES} == {h: 2 for h in DEAD_NAMES}
    assert parked[LATE_NAME] == 1
    assert parked[refused] == 1
    assert parked[busy] >= 1
    total = sum(parked.values())
    assert sum(n for why in reasons.values() for n in why.values()) == total
    frontier = crawl_status(redis_url, "unanswering")["frontier"]
    assert (frontier["parked"], frontier["queued"], frontier["leased"]) == (total, 0, 0)
    stats = stats_of(proc.log_path)
    assert stats["robotstxt/parked_hosts"] >= 1
    assert "robotstxt/unreachable" not in stats  # no URL was dropped
    requeued = cli(redis_url, "unanswering", "parked", "--requeue")
    assert requeued.strip() == f"requeued {total} parked URL(s)"
    assert json.loads(cli(redis_url, "unanswering", "parked")) == {}


def test_without_robots_txt_refused_and_unresolved_hosts_are_parked_too(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """robots.txt off: the pages themselves fail. Each host's first
    CRAWL_CONNECT_PARK_AFTER / CRAWL_DNS_PARK_AFTER (3) URLs fail for good after
    Scrapy's retries; the rest of its queue is parked with the reason."""
    per_host = 5
    dead = [f'<a href="http://{n}/g/{i}">g</a>' for n in DEAD_NAMES for i in range(per_host)]
    dead += [f'<a href="http://{REFUSED}/m/{i}">m</a>' for i in range(per_host)]
    home = f'<html><body><a href="/p/1">next</a> {" ".join(dead)}</body></html>'
    web = testweb_factory(
        hosts=1,
        pages=10,
        latency_ms=2,
        links=2,
        cross_links=0,
        query_variants=0,
        special={1: {"/": {"body": home, "content_type": "text/html"}}},
    )
    settings = {**SETTINGS, "CRAWL_ROBOTS_OBEY": False, "CRAWL_HOST_DELAY": 0.2}
    proc = start_worker(
        REPO_ROOT,
        redis_url,
        "unanswering-plain",
        [web.base_url(1)],
        settings,
        tmp_path / "w.log",
        extra_args=["-a", "scope=any"],
    )
    deadline = time.monotonic() + 180
    while proc.poll() is None:
        assert time.monotonic() < deadline, tail(proc.log_path)
        time.sleep(0.05)
    exited = time.time()
    assert proc.returncode == 0, tail(proc.log_path)
    useful = [r for r in web.log if r.status == 200]
    assert len({r.path for r in useful}) == 10
    assert exited - max(r.end for r in useful) <= IDLE_CLOSE + 10, tail(proc.log_path)

    reasons = json.loads(cli(redis_url, "unanswering-plain", "parked", "--reasons"))
    failed_for_good = 3  # the park-after count: those URLs were tried, and failed
    expected = {name: {"dns": per_host - failed_for_good} for name in DEAD_NAMES}
    expected[REFUSED] = {"connection_refused": per_host - failed_for_good}
    assert reasons == expected
    stats = stats_of(proc.log_path)
    assert stats["connect/parked_hosts"] == 1
    assert stats["connect/refused"] == failed_for_good
    assert stats["dns/parked_hosts"] == len(DEAD_NAMES)
    requeued = cli(redis_url, "unanswering-plain", "parked", "--requeue")
    assert requeued.strip() == f"requeued {3 * (per_host - failed_for_good)} parked URL(s)"


def test_an_unreachable_robots_txt_names_its_reason() -> None:
    assert unreachable_reason(FetchOutcome(status=503)) == "robots_503"
    assert unreachable_reason(FetchOutcome(status=429)) == "robots_429"
    cases = {
        "CannotResolveHostError: DNS lookup failed: no results for hostname lookup: x": "dns",
        "DNSLookupError: DNS lookup failed": "dns",
        "DownloadConnectionRefusedError: Connection was refused": "connection_refused",
        "ConnectionRefusedError: Connection was refused by other side": "connection_refused",
        "DownloadTimeoutError: Getting http://x/robots.txt took longer than 180.0 s": "timeout",
        "TCPTimedOutError: TCP connection timed out": "timeout",
        "TimeoutError: User timeout caused connection failure": "timeout",
        "ResponseNeverReceived: [<twisted.python.failure.Failure ...>]": "no_answer",
        None: "no_answer",
    }
    for error, reason in cases.items():
        assert unreachable_reason(FetchOutcome(status=0, error=error)) == reason, error
