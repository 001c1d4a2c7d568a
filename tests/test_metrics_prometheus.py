"""A live worker's /metrics as Prometheus reads it: Debian's promtool, the
shipped Grafana dashboard and Prometheus scrape example, on a real crawl of
the loopback test web."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from crawlproject.status.metrics import map_stat
from testkit.crawlproc import (
    REPO_ROOT,
    start_worker,
    tail,
    wait_all,
    wait_until,
)
from testkit.processes import free_port
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb

DASHBOARD = REPO_ROOT / "docs" / "grafana" / "crawlproject-dashboard.json"
SCRAPE_EXAMPLE = REPO_ROOT / "docs" / "prometheus" / "scrape-example.yml"
ALERTS = REPO_ROOT / "docs" / "prometheus" / "alerts.yml"
LINGER_LOG = "Final metrics on"
SEEN_CAPACITY = 10_000  # the live crawl's Bloom seen set
SAMPLE = re.compile(r"^([a-zA-Z_][a-zA-Z0-9_]*)\{(.*)\} (\S+)$")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (./run tests installs Debian's prometheus package)")
    return found


@dataclass
class Scrape:
    text: str

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        found = []
        for line in self.text.splitlines():
            match = SAMPLE.match(line)
            if match and match.group(1) == name:
                labels = dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', match.group(2)))
                found.append((labels, float(match.group(3))))
        return found

    def value(self, name: str, **labels: str) -> float:
        values = [v for got, v in self.samples(name) if labels.items() <= got.items()]
        assert len(values) == 1, f"{name}{labels}: {values}"
        return values[0]

    def families(self) -> set[str]:
        return set(re.findall(r"^# TYPE (\S+) ", self.text, re.MULTILINE))


@dataclass
class LiveCrawl:
    web: TestWeb
    during: Scrape  # while the worker crawled
    final: Scrape  # after the crawl, before the worker exited
    stats: dict[str, int]  # the worker's stats dump
    returncode: int


def stats_dump(log: Path) -> dict[str, int]:
    """The integer stats Scrapy dumps at the end (not the settings it logs)."""
    text = log.read_text(errors="replace").split("Dumping Scrapy stats", 1)[-1]
    return {k: int(v) for k, v in re.findall(r"'([\w/.-]+)': (\d+)[,}]?\n", text)}


def scrape(port: int) -> Scrape:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return Scrape(answer.read().decode())


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCrawl]:
    """One crawl with a 404, a connection reset (a download exception), a URL
    rule and a depth guard at work, and a Bloom seen set (its fill is a
    gauge the dashboard draws), its /metrics scraped twice."""
    tmp = tmp_path_factory.mktemp("metrics")
    special = {2: {"/gone": {"status": 404}}, 3: {"/reset": {"reset": True}}}
    with RedisServer() as redis:
        web = TestWeb(hosts=3, pages=12, latency_ms=(20, 40), links=2, cross_links=1,
                      query_variants=1, special=special).start()  # fmt: skip
        try:
            seeds = [*web.seeds, web.seeds[1] + "gone", web.seeds[2] + "reset"]
            port = free_port()
            proc = start_worker(
                REPO_ROOT, redis.url, "metered", seeds,
                {"CRAWL_HOST_DELAY": 0.3, "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
                 "CRAWL_IDLE_POLL_SECONDS": 0.2, "CRAWL_STATUS_REPORT_SECONDS": 0.3,
                 "CRAWL_METRICS_PORT": port, "CRAWL_METRICS_LINGER_SECONDS": 120,
                 # Every page thin (depth_chains.py): the depth guard counts every hop.
                 "CRAWL_MAX_DEPTH": 3, "CRAWL_DEDUPE_MIN_TEXT_CHARS": 10**6,
                 "CRAWL_DENY_PATH_PREFIXES": ["/p/7"],
                 "CRAWL_SEEN_FILTER": "bloom", "CRAWL_SEEN_CAPACITY": SEEN_CAPACITY},
                tmp / "worker.log",
            )  # fmt: skip
            try:
                wait_until(lambda: len(web.log) >= 8 or proc.poll() is not None, timeout=60)
                assert proc.poll() is None, tail(proc.log_path)
                during = scrape(port)
                wait_until(
                    lambda: LINGER_LOG in proc.log_path.read_text() or proc.poll() is not None,
                    timeout=120,
                )
                assert proc.poll() is None, tail(proc.log_path)
                final = scrape(port)
            finally:
                wait_all([proc], timeout=60, check=False)
            yield LiveCrawl(web, during, final, stats_dump(proc.log_path), proc.returncode)
        finally:
            web.stop()


def check_metrics(text: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [promtool(), "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
    )


def test_promtool_finds_nothing_to_say(live: LiveCrawl) -> None:
    for scraped in (live.during, live.final):
        checked = check_metrics(scraped.text)
        assert checked.stdout + checked.stderr == b"", scraped.text
        assert checked.returncode == 0
    # promtool does lint: the names this exporter no longer makes fail it.
    old = "# HELP crawl_x_count x\n# TYPE crawl_x_count gauge\ncrawl_x_count 1\n"
    assert check_metrics(old).returncode != 0


def test_labels_and_counts_of_a_live_worker(live: LiveCrawl) -> None:
    assert live.returncode == 0
    final = live.final
    statuses = [record.status for record in live.web.log]
    workers = {labels["worker"] for labels, _ in final.samples("crawlproject_store_pages_total")}
    assert len(workers) == 1 and re.fullmatch(r"[0-9a-f]{12}", next(iter(workers)))
    worker = next(iter(workers))
    target = {"crawl": "metered", "worker": worker}
    # Every sample says which crawl and worker it is from.
    for line in final.text.splitlines():
        if line and not line.startswith("#"):
            assert 'crawl="metered"' in line and f'worker="{worker}"' in line, line
    # Status and exception are labels, counted as the web served them.
    responses = "crawlproject_downloader_responses_total"
    assert final.value(responses, status="200", **target) == statuses.count(200) > 20
    assert final.value(responses, status="404", **target) == statuses.count(404) > 0
    exceptions = dict(
        (labels["exception"], value)
        for labels, value in final.samples("crawlproject_downloader_exceptions_total")
    )
    # /reset: tried 1 + RETRY_TIMES (Scrapy's 2) times; Twisted may retry a reset
    # on a reused connection once more by itself (the server sees that one too).
    failed = exceptions.get("scrapy.exceptions.DownloadFailedError", 0)
    assert failed == 3 <= statuses.count(0)
    assert (
        final.value("crawlproject_retries_total", reason="scrapy.exceptions.DownloadFailedError")
        == 2
    )
    assert final.value("crawlproject_rules_refused_total", reason="path_denied") > 0
    assert final.value("crawlproject_trap_total", reason="max_depth") > 0
    # While it ran, no count was ahead of the final one.
    during = live.during.value(responses, status="200", **target)
    assert 0 < during <= final.value(responses, status="200", **target)
    assert final.value("crawlproject_frontier_queued_urls", **target) == 0
    assert final.value("crawlproject_store_paused", **target) == 0
    # Each counter of the worker's stats dump is exported, by the rule, exactly.
    compared = 0
    for stat, value in live.stats.items():
        mapped = map_stat(stat)
        if mapped is None or mapped[0].kind != "counter" or stat.startswith("log_count/"):
            continue
        family, label = mapped
        labels = {family.label: label} if family.label and label is not None else {}
        assert final.value(family.exposed, **labels) == value, stat
        compared += 1
    assert compared > 30
    # The Bloom seen set's levels, as its stats say (the fill: URLs / capacity).
    seen = final.value("crawlproject_frontier_seen_urls", **target)
    assert seen == live.stats["frontier/seen_urls"] > 20
    used = final.value("crawlproject_frontier_seen_capacity_used", **target)
    assert used == pytest.approx(seen / SEEN_CAPACITY, abs=1e-4)
    assert 0 < final.value("crawlproject_frontier_seen_fp_rate_expected", **target) < 0.001
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", final.text, re.MULTILINE))
    levels = ("store_spool_bytes", "store_paused", "in_flight_requests", "memusage_max_bytes",
              "frontier_seen_urls", "frontier_seen_capacity_used",
              "frontier_seen_fp_rate_expected")  # fmt: skip
    for level in levels:
        assert types[f"crawlproject_{level}"] == "gauge"
    assert all(kind == "counter" for name, kind in types.items() if name.endswith("_total"))


def dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
    assert all(panel["targets"] for panel in board["panels"])
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["query"]["query"])
    return queries


def test_the_dashboard_queries_only_what_a_worker_serves(live: LiveCrawl) -> None:
    queries = dashboard_queries()
    names = {name for query in queries for name in re.findall(r"\bcrawlproject_\w+", query)}
    assert len(names) >= 15
    missing = names - live.final.families()
    assert not missing, f"the dashboard queries names no worker serves: {sorted(missing)}"
    # No other metric: every selector is one of ours (functions take no braces).
    for query in queries:
        for selected in re.findall(r"\b([a-zA-Z_:][\w:]*)\s*\{", query):
            assert selected.startswith("crawlproject_"), query
    # The labels it groups and filters by are the exporter's.
    served_labels = set(re.findall(r'([a-z_]+)="', live.final.text))
    for query in queries:
        for group in re.findall(r"by \(([^)]*)\)", query):
            assert {g.strip() for g in group.split(",")} <= served_labels, query


def test_the_prometheus_example_passes_promtool_check_config() -> None:
    checked = subprocess.run(
        [promtool(), "check", "config", SCRAPE_EXAMPLE.name],
        cwd=SCRAPE_EXAMPLE.parent, capture_output=True, timeout=60,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert b"SUCCESS" in checked.stdout + checked.stderr


def test_the_alerts_pass_promtool_and_their_unit_tests() -> None:
    """promtool's own checks of the shipped rules and of their unit tests
    (alerts_test.yml: each alert fires when it should, with its words, and
    not before)."""
    for command in (["check", "rules", ALERTS.name], ["test", "rules", "alerts_test.yml"]):
        checked = subprocess.run(
            [promtool(), *command], cwd=ALERTS.parent, capture_output=True, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert b"SUCCESS" in checked.stdout + checked.stderr
    assert b"alerts.yml" in SCRAPE_EXAMPLE.read_bytes()  # checked with the config above


def test_the_alerts_name_only_what_a_worker_serves(live: LiveCrawl) -> None:
    names = set(re.findall(r"\bcrawlproject_\w+", ALERTS.read_text()))
    assert len(names) >= 4
    missing = names - live.final.families()
    assert not missing, f"the alerts name metrics no worker serves: {sorted(missing)}"
