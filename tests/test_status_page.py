"""``crawlproject status --serve``: the status page, in a real headless browser.

Debian's chromium (installed by ``./run tests``), driven by Playwright, loads
the page served for a real crawl of the loopback test web on a real
redis-server; the figures it shows equal ``crawlproject status --json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from scrapy import Request
from scrapy.http import Response

from crawlproject.status.hosts import HostTally, merge_reports, stale_fields
from crawlproject.status.page import StatusServer, parse_listen
from crawlproject.status.view import index_layout
from testkit.crawlproc import REPO_ROOT, crawl_status, start_worker, tail, wait_all
from testkit.processes import free_port
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SETTINGS = {
    "CRAWL_HOST_DELAY": 0.3, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "CRAWL_STATUS_REPORT_SECONDS": 0.3, "CRAWL_DEDUPE_ENABLED": False,
}  # fmt: skip
# Figures that depend on the time of the read (a sliding window), not only on Redis.
WINDOWED = {"throughput.pages_per_second_last_minute", "throughput.pages_last_minute"}


# -- pure logic -------------------------------------------------------------------------


def test_listen_address_defaults_to_loopback() -> None:
    assert parse_listen("8080") == ("127.0.0.1", 8080)
    assert parse_listen("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    for bad in ("", "http", "host:", ":80", "1.2.3.4:70000"):
        with pytest.raises(ValueError):
            parse_listen(bad)


def _fetch(tally: HostTally, url: str, status: int | None) -> None:
    """One request through the downloader's signals (status None: no answer)."""
    request = Request(url)
    if status is not None:
        tally.response_downloaded(Response(url, status=status, request=request), request, None)
    tally.request_left_downloader(request, None)


def test_host_tally_counts_pages_and_errors_bounded() -> None:
    tally = HostTally(max_hosts=8)
    for _ in range(5):
        _fetch(tally, "http://busy.example/", 200)
    _fetch(tally, "http://busy.example/x", 503)
    _fetch(tally, "http://down.example:8080/", None)  # refused, timed out...
    _fetch(tally, "http://down.example:8080/", None)
    _fetch(tally, "http://slow.example/", 429)
    _fetch(tally, "http://user:secret@busy.example/", 200)  # credentials never shown
    assert tally.pages == {"busy.example": 7, "slow.example": 1}
    assert tally.errors == {"busy.example": 1, "down.example:8080": 2, "slow.example": 1}
    assert not tally._answered  # nothing left over per request
    # Past max_hosts the least busy half goes; the busy hosts stay exact.
    for i in range(20):
        _fetch(tally, f"http://h{i}.example/", 200)
    assert len(set(tally.pages) | set(tally.errors)) <= 8
    assert tally.pages["busy.example"] == 7
    assert tally.errors["down.example:8080"] == 2

    report = json.loads(tally.report(at=1000.0, top=2))
    assert report["hosts"]["busy.example"] == [7, 1]
    assert report["hosts"]["down.example:8080"] == [0, 2]
    assert len(report["hosts"]) <= 4


def test_fleet_hosts_sum_workers_reports_and_drop_stale_ones() -> None:
    one, two = HostTally(), HostTally()
    for _ in range(3):
        _fetch(one, "http://a.example/", 200)
    _fetch(one, "http://b.example/", 500)
    _fetch(two, "http://a.example/", 200)
    _fetch(two, "http://c.example/", None)
    now = 10_000.0
    reports = {"w1": one.report(now - 5), "w2": two.report(now - 1), "old": two.report(now - 7200)}
    merged = merge_reports(reports.values(), now)
    assert merged["workers_reporting"] == 2
    assert merged["busiest"] == [
        {"host": "a.example", "pages": 4, "errors": 0},
        {"host": "b.example", "pages": 1, "errors": 1},
    ]
    assert merged["failing"] == [
        {"host": "b.example", "pages": 1, "errors": 1},
        {"host": "c.example", "pages": 0, "errors": 1},
    ]
    assert stale_fields({**reports, "bad": "{not json"}, now) == ["old", "bad"]


def test_the_page_is_package_data(tmp_path: Path) -> None:
    """Built packages (Scrapyd eggs, wheels) carry page.html beside page.py."""
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "lib")],
        cwd=REPO_ROOT, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    built = tmp_path / "lib" / "crawlproject" / "status"
    assert (built / "page.py").is_file()
    assert (built / "page.html").read_bytes() == (
        REPO_ROOT / "crawlproject" / "status" / "page.html"
    ).read_bytes()


# -- the server --------------------------------------------------------------------------


def start_page(redis_url: str, crawl: str, listen: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", crawl,
           "status", "--serve", listen, "--watch", "0.5"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with open(log, "wb") as out:
        return subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip


def wait_serving(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"status page not serving\n{tail(log)}") from None
            time.sleep(0.1)


def stop_page(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def http(url: str, method: str = "GET", host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_the_server_is_read_only_and_warns_when_bound_beyond_loopback(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "page.log"
    proc = start_page(redis_server.url, "quiet", f"0.0.0.0:{port}", log)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_serving(base + "/", proc, log)
        code, body = http(base + "/status.json")
        assert code == 200
        assert json.loads(body)["crawl"] == "quiet"
        assert http(base + "/", "POST")[0] == 405
        assert http(base + "/status.json", "DELETE")[0] == 405
        assert http(base + "/admin")[0] == 404
        # Bound to all addresses: any Host name is answered.
        assert http(base + "/status.json", host="status.example")[0] == 200
    finally:
        assert stop_page(proc) == 0, tail(log)
    text = log.read_text()
    assert f"WARNING: Status page bound to 0.0.0.0: anyone who can reach port {port}" in text

    # Bound to loopback (the default): no warning, and a foreign Host is refused
    # (a page of another site reaching it through DNS rebinding).
    port = free_port()
    proc = start_page(redis_server.url, "quiet", str(port), log)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_serving(base + "/", proc, log)
        assert http(base + "/status.json", host="rebound.example")[0] == 403
        assert http(base + "/status.json", host=f"localhost:{port}")[0] == 200
    finally:
        assert stop_page(proc) == 0, tail(log)
    assert "WARNING" not in log.read_text()


def test_a_redis_that_does_not_answer_is_a_503_and_one_warning(tmp_path: Path) -> None:
    port, dead = free_port(), free_port()  # nothing listens on ``dead``
    log = tmp_path / "page.log"
    proc = start_page(f"redis://127.0.0.1:{dead}/0", "down", str(port), log)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_serving(base + "/", proc, log)  # the page itself is served
        for _ in range(3):
            code, body = http(base + "/status.json")
            assert code == 503
            assert "cannot read the crawl's Redis" in json.loads(body)["error"]
            time.sleep(1.1)  # past the cache: a new read each time
    finally:
        assert stop_page(proc) == 0, tail(log)
    assert log.read_text().count("WARNING: Status page: cannot read the crawl's Redis") == 1


# -- in a browser ------------------------------------------------------------------------


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} missing: Debian's chromium could not be installed "
            "(./run tests installs it with apt-get)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # fresh --user-data-dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context.new_page()
        finally:
            context.close()


def keep_artifact(path: Path) -> None:
    target = os.environ.get("TEST_ARTIFACTS_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(target) / path.name)


def wait_js(page: Any, expression: str, want: object, timeout: float = 60) -> None:
    """Polls ``expression`` in the page until it is ``want`` (Playwright's
    wait_for_function evaluates strings with eval, which the page's CSP forbids)."""
    deadline = time.monotonic() + timeout
    while (got := page.evaluate(expression)) != want:
        assert time.monotonic() < deadline, f"{expression}: {got!r}, not {want!r}"
        time.sleep(0.1)


def lookup(status: dict[str, Any], path: str) -> Any:
    value: Any = status
    for part in path.split("."):
        value = value[part]
    return value


def number(text: str) -> float:
    return float(text.replace(",", ""))


def dom_figures(page: Any) -> dict[str, float]:
    """Every ``data-field`` element's number, as shown (one per path)."""
    pairs = page.eval_on_selector_all(
        "[data-field]", "els => els.map(e => [e.dataset.field, e.textContent])"
    )
    figures: dict[str, float] = {}
    for path, text in pairs:
        assert figures.setdefault(path, number(text)) == number(text), path
    return figures


def netloc(web: TestWeb, host: int) -> str:
    return urlsplit(web.seeds[host - 1]).netloc


def dom_hosts(page: Any, table: str) -> list[dict[str, Any]]:
    rows = page.eval_on_selector_all(
        f"#{table} tbody tr[data-host]",
        """rows => rows.map(r => [r.dataset.host,
            r.querySelector('[data-col="pages"]').textContent,
            r.querySelector('[data-col="errors"]').textContent])""",
    )
    return [{"host": h, "pages": number(p), "errors": number(e)} for h, p, e in rows]


def dom_addresses(page: Any) -> dict[str, list[dict[str, Any]]]:
    """The addresses section's two tables, as --json's ``at_cap`` and ``waited_on``."""
    rows = {
        table: page.eval_on_selector_all(
            f"#{table} tbody tr[data-address]",
            "rows => rows.map(r => [r.dataset.address, "
            "...[...r.querySelectorAll('[data-col]')].map(c => c.textContent)])",
        )
        for table in ("at-cap", "waited-on")
    }
    return {
        "at-cap": [{"address": a, "in_flight": number(n)} for a, n in rows["at-cap"]],
        "waited-on": [
            {"address": a, "hosts_waiting": number(n), "first": first.split(", ")}
            for a, n, first in rows["waited-on"]
        ],
    }


def test_the_status_page_in_a_browser_shows_what_status_json_says(
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    browser_page: Any,
) -> None:
    # Host 2 answers one page 503 (retried, each a failure), host 3 resets the
    # connection on one (no answer at all).
    web = testweb_factory(
        hosts=3, pages=20, latency_ms=(20, 40), links=2, cross_links=1, query_variants=0,
        special={2: {"/p/3": {"status": 503}}, 3: {"/p/4": {"reset": True}}},
    )  # fmt: skip
    worker = start_worker(REPO_ROOT, redis_server.url, "paged", web.seeds, SETTINGS,
                          tmp_path / "worker.log")  # fmt: skip
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    log = tmp_path / "page.log"
    server = start_page(redis_server.url, "paged", f"127.0.0.1:{port}", log)
    page = browser_page
    requested: list[str] = []
    script_errors: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    try:
        wait_serving(url, server, log)
        page.goto(url)
        # While the crawl runs: its worker shows up alive, with its row.
        wait_js(page, "document.querySelector('[data-field=\"workers.alive\"]').textContent", "1")
        assert page.locator("#workers tbody tr[data-worker]").count() == 1
        live_shot = tmp_path / "status_page_live.png"
        page.screenshot(path=str(live_shot), full_page=True)
        keep_artifact(live_shot)
        wait_all([worker], timeout=180)

        before = crawl_status(redis_server.url, "paged")
        # The page's next refresh is read after ``before``: same Redis, later clock.
        wait_js(page, f"Number(document.body.dataset.loaded) > {before['time']}", True)
        figures = dom_figures(page)
        busiest, failing = dom_hosts(page, "busiest"), dom_hosts(page, "failing")
        groups = page.eval_on_selector_all(
            "[data-group]", "els => els.map(e => [e.dataset.group, e.dataset.key, e.textContent])"
        )
        chart = page.eval_on_selector(
            "#chart",
            """c => ({points: c.dataset.points, total: c.dataset.total,
                      line: c.querySelector('polyline').getAttribute('points')})""",
        )
        shown_at = float(page.evaluate("document.body.dataset.loaded"))
        addresses = dom_addresses(page)
        worker_rows = page.locator("#workers tbody tr[data-worker]").count()
        after = crawl_status(redis_server.url, "paged")
        shot = tmp_path / "status_page.png"
        page.screenshot(path=str(shot), full_page=True)
        keep_artifact(shot)
    finally:
        assert stop_page(server) == 0, tail(log)

    assert not script_errors
    # Every figure equals `crawlproject status --json` (read before and after
    # it: the crawl is over, so they agree but for the sliding windows).
    assert len(figures) >= 25
    for path, shown in figures.items():
        if path in WINDOWED:
            continue
        assert lookup(before, path) == lookup(after, path), path
        assert shown == lookup(before, path), path
    # Pages of the last minute only leave the window as time passes.
    window = "throughput.pages_last_minute"
    assert lookup(after, window) <= figures[window] <= lookup(before, window)
    # Pages/s over the last minute: --json's definition, at the page's time.
    recent = [n for t, n in before["throughput"]["series_last_hour"] if t >= shown_at - 60]
    span = max(shown_at - min(t for t, n in before["throughput"]["series_last_hour"]
                              if t >= shown_at - 60), 10) if recent else 1.0  # fmt: skip
    rate = figures["throughput.pages_per_second_last_minute"]
    assert rate == pytest.approx(sum(recent) / span, abs=0.002)
    assert figures["fleet.pages"] > 0
    assert figures["workers.alive"] == 0 and worker_rows == 0
    for group, key, text in groups:
        assert number(text) == before["fleet"]["groups"][group][key], (group, key)
    # The addresses section is on the page, as in --json and the terminal view.
    assert {"addresses.taken", "addresses.denied", "addresses.woken"} <= figures.keys()
    assert figures["addresses.taken"] > 0
    assert addresses == {"at-cap": before["addresses"]["at_cap"],
                         "waited-on": before["addresses"]["waited_on"]}  # fmt: skip
    assert {group for group, _, _ in groups} >= {"robotstxt", "store"}
    # The seen set and the duplicate index too (equal to --json above): every
    # URL of the web went through the seen set; dedupe is off in this crawl.
    assert figures["frontier.seen.urls"] >= len(web.expected_urls)
    assert {"dedupe.pages", "dedupe.exact", "dedupe.near"} <= figures.keys()

    # The hosts: as --json says, and as the test web saw them (responses per
    # host; failures: 5xx answers and requests never answered).
    assert busiest == before["hosts"]["busiest"] == after["hosts"]["busiest"]
    assert failing == before["hosts"]["failing"] == after["hosts"]["failing"]
    answered = Counter(urlsplit(r.url).netloc for r in web.log if r.status)
    assert {row["host"]: row["pages"] for row in busiest} == answered
    errors = {row["host"]: row["errors"] for row in failing}
    assert errors.keys() == {netloc(web, 2), netloc(web, 3)}
    assert errors[netloc(web, 2)] == sum(1 for r in web.log if r.status == 503)
    # Twisted's connection pool silently resends a request whose kept-alive
    # connection died: the web sees up to two resets per attempt Scrapy made.
    resets = sum(1 for r in web.log if r.status == 0)
    assert 0 < errors[netloc(web, 3)] <= resets

    # The chart: one point per 10-second bucket of the last hour, and the
    # buckets with pages are --json's.
    assert int(chart["points"]) == len(before["throughput"]["series_last_hour"]) > 0
    assert int(chart["total"]) == before["throughput"]["pages_last_hour"] == figures["fleet.pages"]
    points = [tuple(map(float, p.split(","))) for p in chart["line"].split()]
    assert len(points) == 361
    baseline = max(y for _, y in points)
    assert any(y < baseline for _, y in points)  # some buckets drawn above zero

    # Nothing outside the page's own server was asked for (no external asset).
    assert requested
    assert {urlsplit(u).netloc for u in requested} == {f"127.0.0.1:{port}"}
    assert shot.stat().st_size > 10_000


@contextlib.contextmanager
def served(status: dict[str, Any]) -> Iterator[str]:
    """``status`` (a --json object, read again at every refresh: change it
    and the page shows the change) served by the page's own server; its URL."""

    async def collect() -> dict[str, Any]:
        return status

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    server = StatusServer(("127.0.0.1", 0), collect, loop, refresh_seconds=0.5)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)


def test_the_page_shows_the_addresses_at_their_cap_and_waited_on(
    redis_server: RedisServer, browser_page: Any
) -> None:
    """Rows a short test crawl leaves empty once it is over (every place comes
    back): a real --json object of a crawl, its addresses section filled in,
    served by the page's own server to the browser."""
    status = crawl_status(redis_server.url, "quiet")
    status["addresses"] = {
        "taken": 1234, "denied": 56, "woken": 7,
        "at_cap": [{"address": "192.0.2.7", "in_flight": 4},
                   {"address": "2001:db8::1", "in_flight": 2}],
        "waited_on": [{"address": "192.0.2.7", "hosts_waiting": 9,
                       "first": ["a.example", "<b>.example"]}],
    }  # fmt: skip
    page = browser_page
    with served(status) as url:
        page.goto(url)
        wait_js(page, "document.body.dataset.loaded !== undefined", True)
        figures = dom_figures(page)
        addresses = dom_addresses(page)
    assert {k: figures[f"addresses.{k}"] for k in ("taken", "denied", "woken")} == {
        "taken": 1234,
        "denied": 56,
        "woken": 7,
    }
    assert addresses == {
        "at-cap": status["addresses"]["at_cap"],
        "waited-on": status["addresses"]["waited_on"],  # host names shown as text
    }


def dom_seen(page: Any) -> dict[str, Any]:
    """The seen set's rows as shown: its kind, whether the Bloom rows are
    visible, and their values (the raw numbers behind the text)."""
    return page.evaluate(
        """() => ({
            filter: document.querySelector('[data-text="frontier.seen.filter"]').textContent,
            bloom_shown: [...document.querySelectorAll('.bloom')].map(e => !e.hidden),
            used: document.getElementById('seen-used').dataset.value,
            used_text: document.getElementById('seen-used').textContent,
            fp: document.getElementById('seen-fp').dataset.value,
            layout: document.getElementById('index-layout').textContent,
        })"""
    )


def test_the_page_shows_the_seen_set_and_the_duplicate_index(
    redis_server: RedisServer, browser_page: Any
) -> None:
    """A Bloom filter's fill and false-positive rate, then an exact set (the
    Bloom rows hidden); the duplicate index's counts and layout: as --json
    has them and the terminal view words them."""
    status = crawl_status(redis_server.url, "quiet")
    status["frontier"]["seen"] = {
        "filter": "bloom", "urls": 123_456, "capacity": 1_000_000,
        "capacity_used": 0.1235, "expected_fp_rate": 2.4e-06,
    }  # fmt: skip
    growing = {"pages": 9876, "exact": 54, "near": 32, "layout": "growing",
               "near_tables": 10, "near_level": 17}  # fmt: skip
    fixed = {**growing, "layout": "fixed", "near_level": None}  # an index from before
    status["dedupe"] = growing
    page = browser_page
    with served(status) as url:
        page.goto(url)
        wait_js(page, "document.body.dataset.loaded !== undefined", True)
        bloom_figures, bloom = dom_figures(page), dom_seen(page)
        # The next refresh reads the changed object: an exact set, an old index.
        loaded = page.evaluate("document.body.dataset.loaded")
        status["frontier"]["seen"] = {"filter": "exact", "urls": 77}
        status["dedupe"] = fixed
        status["time"] += 1
        wait_js(page, f"document.body.dataset.loaded !== {json.dumps(loaded)}", True)
        exact_figures, exact = dom_figures(page), dom_seen(page)
        # A one-tag index (workers refuse it since issue 42): the command to run.
        loaded = page.evaluate("document.body.dataset.loaded")
        one_tag = {**fixed, "layout": "one-tag"}
        status["dedupe"] = one_tag
        status["time"] += 1
        wait_js(page, f"document.body.dataset.loaded !== {json.dumps(loaded)}", True)
        one_tag_shown = dom_seen(page)["layout"]
    migrate = "one-tag index: run crawlproject dedupe migrate"
    assert one_tag_shown == index_layout(one_tag) == migrate
    assert bloom_figures["frontier.seen.urls"] == 123_456
    assert {k: bloom_figures[f"dedupe.{k}"] for k in ("pages", "exact", "near")} == {
        "pages": 9876,
        "exact": 54,
        "near": 32,
    }
    assert bloom["filter"] == "bloom" and bloom["bloom_shown"] == [True] * 4
    assert (float(bloom["used"]), float(bloom["fp"])) == (0.1235, 2.4e-06)
    assert bloom["used_text"] == "12.3 % of 1,000,000"
    assert bloom["layout"] == index_layout(growing) == "10 (17)"
    assert exact["filter"] == "exact" and exact["bloom_shown"] == [False] * 4
    assert (exact["used_text"], exact["used"], exact["fp"]) == ("\u2013", None, None)  # none kept
    assert exact["layout"] == index_layout(fixed) == "10 (fixed)"
    assert exact_figures["frontier.seen.urls"] == 77
