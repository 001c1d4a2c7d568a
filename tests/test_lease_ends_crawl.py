"""Every lease ends on every path, whatever the spider: real ``scrapy crawl``
workers of a tutorial-style spider with no errback
(tests/spiders_for_tests/no_errback.py), on a real Redis and a real loopback
site whose pages fail in every way a request can fail in Scrapy: a redirect
chain longer than REDIRECT_MAX_TIMES, a 404 (HttpErrorMiddleware), a
downloader middleware raising in process_request, process_response and
process_exception, a spider middleware raising in process_spider_input, the
callback raising, an errback raising, DOWNLOAD_MAXSIZE exceeded as sent and
once decompressed, an item pipeline dropping the item, a refused connection
(tests/spiders_for_tests/failing.py). The crawl ends by itself, every URL is
finished in the frontier, none is left leased and none is fetched twice. The
same holds for the project's ``web`` spider, whose errback does not end leases."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crawlproject import settings as project_settings
from testkit.crawlproc import REPO_ROOT, WorkerProcess, start_worker, stats_of, tail

IDLE_CLOSE_SECONDS = 2.0
REDIRECT_MAX = 3
MAXSIZE = 100_000
# Every way to fail, each the last step of its own URL (the redirect chain's
# hops are separate URLs of the frontier; its last hop is refused).
FAILING = [
    "/missing",
    "/fail-request",
    "/fail-response",
    "/fail-exception",
    "/fail-spider-input",
    "/raise-in-callback",
    "/errback-raises",
    "/errback-raises-404",
    "/big",
    "/bomb",
    "/drop-item",
]
NOT_FOUND = {"/missing", "/errback-raises-404"}
NEVER_SENT = {"/fail-request", "/fail-exception"}  # failed in process_request
RETRIES = 1  # RETRY_TIMES: the refused connection's
PAGES = ["/", "/ok/1", "/ok/2", *FAILING]
HOPS = [f"/redirect/{i}" for i in range(REDIRECT_MAX + 1)]  # the last is not followed
FAILING_COMPONENTS = "tests.spiders_for_tests.failing."


def html(title: str, links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return f"<html><head><title>{title}</title></head><body>{anchors}</body></html>".encode()


class FailingSite:
    """A loopback site; ``log``: every path asked for, in order."""

    def __init__(self, ip: str, refused_url: str) -> None:
        self.log: list[str] = []
        self.last_request = 0.0
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.log.append(self.path)
                site.last_request = time.monotonic()
                status, headers, body = site.answer(self.path, refused_url)
                self.send_response(status)
                for name, value in {"Content-Type": "text/html", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((ip, 0), Handler)
        self.base = f"http://{ip}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def answer(path: str, refused_url: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/":
            return 200, {}, html("index", ["/ok/1", "/redirect/0", *FAILING, refused_url])
        if path.startswith("/redirect/"):
            return 302, {"Location": f"/redirect/{int(path.rsplit('/', 1)[1]) + 1}"}, b""
        if path in NOT_FOUND:
            return 404, {}, html("not found", ["/"])
        if path == "/big":
            return 200, {}, html("big", []) + b" " * (3 * MAXSIZE)
        if path == "/bomb":  # a few hundred bytes sent, 10 x DOWNLOAD_MAXSIZE once unzipped
            return 200, {"Content-Encoding": "gzip"}, gzip.compress(b" " * (10 * MAXSIZE))
        if path == "/ok/1":
            return 200, {}, html("ok 1", ["/", "/ok/2"])
        return 200, {}, html(path, ["/", "/ok/1"])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port(ip: str) -> int:
    """A port nothing listens on at ``ip``: a connection to it is refused."""
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


@pytest.fixture
def failing_site() -> Iterator[FailingSite]:
    site = FailingSite("127.0.0.2", f"http://127.0.0.3:{closed_port('127.0.0.3')}/refused")
    yield site
    site.close()


def counts(redis_url: str, crawl: str) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", crawl,
         "counts"], cwd=REPO_ROOT, check=True, capture_output=True, timeout=60,
    ).stdout  # fmt: skip
    return dict(json.loads(out))


def wait_exit(proc: WorkerProcess, timeout: float) -> float:
    """Waits for ``proc``; the monotonic time it was seen gone."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"the crawl did not end by itself in {timeout:.0f} s:\n{tail(proc.log_path)}")
    return time.monotonic()


# The tutorial's spider, and the project's own, whose errback (on_error)
# records the failed fetch but is not what ends its lease.
SPIDERS = {"no_errback": [], "web": ["-a", "scope=any"]}


@pytest.mark.parametrize("spider", list(SPIDERS))
def test_every_lease_ends_and_the_crawl_ends_by_itself(
    spider: str, redis_url: str, failing_site: FailingSite, tmp_path: Path
) -> None:
    settings: dict[str, object] = {
        "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
        "CRAWL_NAME": spider,
        "CRAWL_IDLE_CLOSE_SECONDS": IDLE_CLOSE_SECONDS,
        "CRAWL_IDLE_POLL_SECONDS": 0.2,
        "CRAWL_HOST_DELAY": 0.05,
        "CRAWL_ROBOTS_OBEY": False,  # robots.txt's own paths: tests/test_lease_outcomes.py
        "REDIRECT_MAX_TIMES": REDIRECT_MAX,
        "DOWNLOAD_MAXSIZE": MAXSIZE,
        "RETRY_TIMES": RETRIES,
        "DOWNLOADER_MIDDLEWARES": {
            **project_settings.DOWNLOADER_MIDDLEWARES,
            FAILING_COMPONENTS + "FailingDownloaderMiddleware": 500,
        },
        "SPIDER_MIDDLEWARES": {
            **project_settings.SPIDER_MIDDLEWARES,
            FAILING_COMPONENTS + "FailingSpiderMiddleware": 500,
        },
        "ITEM_PIPELINES": {
            FAILING_COMPONENTS + "DroppingPipeline": 50,
            **project_settings.ITEM_PIPELINES,
        },
    }
    started = time.monotonic()
    proc = start_worker(REPO_ROOT, redis_url, spider, [failing_site.base + "/"], settings,
                        tmp_path / "worker.log", SPIDERS[spider], spider=spider)  # fmt: skip
    ended = wait_exit(proc, timeout=120)
    log = tail(proc.log_path, 80)
    assert proc.returncode == 0, log
    # It ends by itself once its work is done: within the idle close and a
    # few seconds of the site's last answer (start-up and close included).
    assert ended - failing_site.last_request < IDLE_CLOSE_SECONDS + 6, log
    assert ended - started < 90, log

    stats = stats_of(proc.log_path)
    fetched = Counter(failing_site.log)
    assert all(n == 1 for n in fetched.values()), fetched
    # Every linked URL was fetched but those a process_request refused; beside
    # them only the soft-404 probes the crawl itself queued (random paths).
    expected = {*PAGES, *HOPS} - NEVER_SENT
    assert expected <= set(fetched), (sorted(expected - set(fetched)), log)
    probes = stats.get("trap/soft404_probes", 0)
    assert len(set(fetched) - expected) == probes, fetched

    frontier = counts(redis_url, spider)
    assert frontier.get("leased", 0) == 0 and frontier.get("queued", 0) == 0, frontier
    # Every URL stored is finished: done, or moved on (a redirect hop, a
    # retry). Done: every page, the chain's last hop, the refused URL's last
    # attempt, the probes.
    assert frontier["done"] == len(PAGES) + 1 + 1 + probes, frontier
    assert frontier["enqueued"] == frontier["done"] + REDIRECT_MAX + RETRIES, frontier
    # The paths no ack middleware reaches, ended by the engine's end of their
    # request: the chain's last hop (IgnoreRequest from RedirectMiddleware's
    # process_response), a process_response raising (alone and with an
    # errback that raises), the decompression limit (HttpCompressionMiddleware's
    # process_response); a process_exception raising past the ack middleware
    # (never downloaded). The web spider's errback on_error, on every request,
    # records the failure and leaves the lease alone.
    assert stats.get("frontier/lease_ended/failed") == 4, stats
    assert stats.get("frontier/lease_ended/not_downloaded") == 1, stats
    assert "frontier/lease_ended/unacked" not in stats, stats
    assert stats.get("frontier/leases_lost", 0) == 0, stats
