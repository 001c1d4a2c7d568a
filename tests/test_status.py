"""``crawlproject status`` and the Prometheus endpoint, against a real running crawl."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from crawlproject.status.view import render
from testkit.crawlproc import (
    LOOPBACK_ALLOW,
    REPO_ROOT,
    crawl_status,
    start_worker,
    stats_of,
    tail,
    wait_all,
    wait_until,
)
from testkit.processes import free_port
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb

SETTINGS = {
    "CRAWL_HOST_DELAY": 0.3, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "CRAWL_STATUS_REPORT_SECONDS": 0.3, "CRAWL_DEDUPE_ENABLED": False,
}  # fmt: skip


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.MULTILINE)
    assert found, f"{name} not in the metrics"
    return float(found.group(1))


def test_status_and_metrics_during_and_after_a_crawl(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # 3 x 40 pages, 0.3 s apart per host: the crawl is still on for ~10 s after the
    # 12th fetch (with 12 pages a host, a test process starved on a loaded machine
    # once reached /metrics after the worker had closed it: CI run at 504c66d).
    web = testweb_factory(hosts=3, pages=40, latency_ms=(20, 40), links=2, cross_links=1,
                          query_variants=0)  # fmt: skip
    port = free_port()
    proc = start_worker(
        REPO_ROOT, redis_server.url, "watched", web.seeds,
        {**SETTINGS, "CRAWL_METRICS_PORT": port, "CRAWL_DATA_DIR": str(tmp_path / "data")},
        tmp_path / "worker.log",
    )  # fmt: skip
    try:
        wait_until(lambda: len(web.log) >= 12 or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, tail(proc.log_path)
        live = crawl_status(redis_server.url, "watched")
        served = len(web.log)  # read after the status: it can only be ahead of it
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
        served_after_metrics = len(web.log)
    finally:
        wait_all([proc], timeout=120)

    # While it runs: one worker alive, work in every state, counts never ahead
    # of what the server saw.
    assert proc.returncode == 0
    assert live["workers"]["alive"] == 1
    frontier = live["frontier"]
    assert 0 < live["fleet"]["pages"] <= served
    assert frontier["done"] <= live["fleet"]["pages"]
    assert frontier["queued"] + frontier["leased"] > 0  # not finished yet
    assert frontier["leases_in_flight"] == frontier["leased"]
    assert frontier["leases_expired"] == 0
    assert frontier["hosts_ready_now"] + frontier["hosts_waiting_on_delay"] <= web.hosts
    assert live["throughput"]["pages_per_second_last_minute"] > 0
    assert live["throughput"]["pages_last_minute"] <= served
    # Prometheus: the worker's own stats (tests/test_metrics_*.py: names, labels, promtool).
    pages = metric(metrics, "crawlproject_response_received_total")
    assert 1 <= pages <= served_after_metrics
    assert metric(metrics, "crawlproject_store_pages_total") <= pages

    # After it: the fleet's totals match the server's log exactly.
    final = crawl_status(redis_server.url, "watched")
    stats = stats_of(proc.log_path)
    assert final["fleet"]["pages"] == len(web.log) == stats["response_received_count"]
    assert final["frontier"]["done"] == len(web.expected_urls)
    assert final["frontier"]["queued"] == final["frontier"]["leased"] == 0
    assert final["storage"]["pages_stored"] == len(web.expected_urls)
    assert final["fleet"]["groups"]["robotstxt"]["request_count"] == web.hosts
    # Each host's first URL waited for its robots.txt (a download exception to
    # Scrapy, a decision here): a clean crawl shows no errors.
    assert final["fleet"]["groups"]["web/error"]["RobotsDeferred"] > 0
    assert stats["downloader/exception_count"] > 0
    assert final["fleet"]["errors"] == 0
    assert final["workers"]["alive"] == 0  # it said goodbye
    assert final["recrawl"] == {"tracked": 0, "overdue": 0, "oldest_overdue_seconds": 0.0}
    # Duplicate detection is off here: no index (tests/test_dedupe_index.py has one).
    assert final["dedupe"] == {
        "pages": 0, "exact": 0, "near": 0, "layout": "none", "near_tables": 0, "near_level": None
    }  # fmt: skip
    # The terminal view renders the same numbers.
    console = Console(file=io.StringIO(), width=120)
    console.print(render(final))
    table = console.file.getvalue()  # type: ignore[attr-defined]
    assert "crawl watched" in table and "hosts ready now" in table
    assert "pages in the duplicate index" in table
    assert f"{len(web.expected_urls):,}" in table
    # Not a terminal: plain logs, no progress line.
    assert "pages/s |" not in proc.log_path.read_text()


def test_a_live_progress_line_on_a_terminal(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=2, pages=6, latency_ms=(20, 40), links=2, cross_links=0,
                          query_variants=0)  # fmt: skip
    primary, replica = pty.openpty()  # stderr is a terminal for the worker
    cmd = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", "crawl=tty",
           "-a", "seeds=" + ",".join(web.seeds), "-s", f"REDIS_URL={redis_server.url}",
           "-s", f"CRAWL_DATA_DIR={tmp_path / 'data'}",
           "-s", f"CRAWL_GUARD_ALLOW={LOOPBACK_ALLOW}"]  # fmt: skip
    for name, value in SETTINGS.items():
        cmd += ["-s", f"{name}={value}"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with open(tmp_path / "stdout.log", "wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=out, stderr=replica)
    os.close(replica)
    seen = b""
    try:
        while proc.poll() is None or select.select([primary], [], [], 0.1)[0]:
            if select.select([primary], [], [], 0.5)[0]:
                try:
                    seen += os.read(primary, 65536)
                except OSError:  # the worker closed its end
                    break
    finally:
        proc.wait(60)
        os.close(primary)
    text = seen.decode(errors="replace")
    lines = re.findall(r"\r\s*([0-9.]+) pages/s \| ([0-9,]+) pages \| queue (\S+) \| errors", text)
    assert lines, text[-2000:]
    assert proc.returncode == 0
    assert max(int(pages.replace(",", "")) for _, pages, _ in lines) <= len(web.log)
