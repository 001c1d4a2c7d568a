"""Scrapy stats -> Prometheus names, types and labels (crawlproject/status/metrics.py)."""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from crawlproject.status.metrics import (
    LABELLED,
    MONOTONIC_SET,
    StatsExporter,
    crawlproject_stat_families,
    is_gauge,
    map_stat,
    snake,
)
from testkit.crawlproc import REPO_ROOT

VALID_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def exposition(stats: dict[str, object], live: dict[str, float] | None = None) -> str:
    registry = CollectorRegistry(auto_describe=False)
    exporter = StatsExporter(lambda: stats, lambda: ("web", "w1"), lambda: live or {})
    registry.register(exporter)  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the one sample of ``name`` with exactly these labels."""
    wanted = {"crawl": "web", "worker": "w1", **labels}
    for line in text.splitlines():
        found = re.fullmatch(r"([a-z0-9_]+)\{(.*)\} (\S+)", line)
        if found and found.group(1) == name:
            got = dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', found.group(2)))
            if got == wanted:
                return float(found.group(3))
    raise AssertionError(f"no {name}{wanted} in:\n{text}")


@pytest.mark.parametrize(
    ("stat", "exposed", "kind", "label"),
    [
        ("downloader/response_status_count/200", "crawlproject_downloader_responses_total",
         "counter", ("status", "200")),
        ("downloader/exception_type_count/twisted.internet.error.DNSLookupError",
         "crawlproject_downloader_exceptions_total", "counter",
         ("exception", "twisted.internet.error.DNSLookupError")),
        ("rules/url_too_long", "crawlproject_rules_refused_total", "counter",
         ("reason", "url_too_long")),
        ("trap/host_cap", "crawlproject_trap_total", "counter", ("reason", "host_cap")),
        ("limits/body_too_large", "crawlproject_limits_reached_total", "counter",
         ("reason", "body_too_large")),
        ("log_count/WARNING", "crawlproject_log_messages_total", "counter", ("level", "WARNING")),
        ("content/unprocessed/application/x-foo", "crawlproject_content_unprocessed_total",
         "counter", ("content_type", "application/x-foo")),
        # Not a list of prefixes: any count is a counter, and ends in _total not _count_total.
        ("response_received_count", "crawlproject_response_received_total", "counter", None),
        ("guard/blocked", "crawlproject_guard_blocked_total", "counter", None),
        ("retry/max_reached", "crawlproject_retry_max_reached_total", "counter", None),
        ("store/bytes", "crawlproject_store_bytes_total", "counter", None),
        ("store/backpressure_seconds", "crawlproject_store_backpressure_seconds_total",
         "counter", None),
        ("brand_new/thing_nobody_listed", "crawlproject_brand_new_thing_nobody_listed_total",
         "counter", None),
        # Levels: gauges, units in the name.
        ("store/spool_bytes", "crawlproject_store_spool_bytes", "gauge", None),
        ("store/backpressure_paused", "crawlproject_store_paused", "gauge", None),
        ("memusage/max", "crawlproject_memusage_max_bytes", "gauge", None),
        ("request_depth_max", "crawlproject_request_depth_max", "gauge", None),
        ("elapsed_time_seconds", "crawlproject_elapsed_time_seconds", "gauge", None),
    ],
)  # fmt: skip
def test_a_stat_and_its_family(
    stat: str, exposed: str, kind: str, label: tuple[str, str] | None
) -> None:
    mapped = map_stat(stat)
    assert mapped is not None
    family, value = mapped
    assert (family.exposed, family.kind) == (exposed, kind)
    assert (None if family.label is None else (family.label, value)) == label
    text = exposition({stat: 7})
    assert f"# TYPE {exposed} {kind}\n" in text
    assert sample(text, exposed, **dict([label] if label else [])) == 7.0


def test_sums_of_a_labelled_family_are_left_to_sum() -> None:
    stats = {
        "downloader/response_count": 5,
        "downloader/response_status_count/200": 4,
        "downloader/response_status_count/404": 1,
    }
    text = exposition(stats)
    assert map_stat("downloader/response_count") is None
    assert "crawlproject_downloader_response_total" not in text
    assert sample(text, "crawlproject_downloader_responses_total", status="200") == 4.0
    assert sample(text, "crawlproject_downloader_responses_total", status="404") == 1.0


def test_every_sample_is_labelled_with_its_crawl_and_worker() -> None:
    stats = {"store/pages": 3, "log_count/INFO": 2, "memusage/max": 10, "finish_reason": "done",
             "start_time": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}  # fmt: skip
    text = exposition(stats, {"in_flight_requests": 4})
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) > 5
    for line in samples:
        assert 'crawl="web"' in line and 'worker="w1"' in line, line
    assert sample(text, "crawlproject_in_flight_requests") == 4.0
    assert sample(text, "crawlproject_start_time_seconds") == 1767225600.0
    assert "finish_reason" not in text  # text stats are not metrics


WEIRD_STATS = [
    "a/b-c/d.e", "Caps/CamelCase/HTTPError", "x//y", "ünïcode/stat", "9lives", "store/ms",
    "timing/latency_s", "cache/size_kb", "wait/minutes", "foo/counter", "bar/gauge_total",
    "queue/items_count_max", "depth/sum", "hist/bucket", "x:y", "stat with spaces",
    "downloader/exception_type_count/<class 'twisted.python.failure.Failure'>",
    "content/unprocessed/text/x-\"quoted\"\\back",
]  # fmt: skip


def test_no_stat_makes_an_invalid_or_linted_name() -> None:
    stats: dict[str, object] = {stat: 1 for stat in WEIRD_STATS}
    stats["alpha/beta-gamma"] = 1
    stats["alpha/beta_gamma"] = 2  # the same name as alpha/beta-gamma: one sample, their sum
    text = exposition(stats)
    names = re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE)
    assert all(VALID_NAME.match(name) and name.startswith("crawlproject_") for name in names)
    assert len(names) == len(set(names))
    assert sample(text, "crawlproject_alpha_beta_gamma_total") == 3.0
    assert sample(text, "crawlproject_ab_cd_e_total") == 1.0  # b (bytes?), d (days?) joined
    for stat in WEIRD_STATS:  # each one exported, somewhere
        mapped = map_stat(stat)
        assert mapped is not None and mapped[0].exposed in names, stat
    assert sample(
        text, "crawlproject_content_unprocessed_total", content_type='text/x-\\"quoted\\"\\\\back'
    )
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (./run tests installs Debian's prometheus package)")
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
    )
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, b""), text


def test_names_never_hold_a_token_promtool_lints() -> None:
    assert snake("timing/latency_s") == "timing_latencys"
    assert snake("cache/size_kb") == "cache_sizekb"
    assert snake("Caps/CamelCase") == "caps_camel_case"
    assert snake("x:y/ü") == "x_y"


def test_labelled_families_have_distinct_names_and_labels() -> None:
    bases = [base for _, base, _, _ in LABELLED]
    assert len(bases) == len(set(bases))
    for _, _, label, _ in LABELLED:
        assert VALID_NAME.match(label) and label not in ("crawl", "worker", "le", "quantile")


def test_stats_set_as_levels_are_gauges() -> None:
    """The rule stays true of the code base: a stat the code *sets* (set_value,
    max_value, min_value) is a level unless declared monotonic; one it
    increments (inc_value) is a count. A new set_value stat fails here until
    it is a gauge (GAUGE_STATS) or declared monotonic (MONOTONIC_SET)."""
    setter = re.compile(r"\.(set_value|max_value|min_value|inc_value)\(\s*f?\"([^\"{]+)\"")
    found: dict[str, set[str]] = {}
    for package in ("crawlproject", "spiders", "middlewares", "pipelines"):
        for path in Path(REPO_ROOT, package).rglob("*.py"):
            for call, stat in setter.findall(path.read_text()):
                found.setdefault(call, set()).add(stat)
    assert len(found["inc_value"]) > 50 and found["set_value"]
    for stat in found["set_value"] | found.get("max_value", set()) | found.get("min_value", set()):
        assert is_gauge(stat) or stat in MONOTONIC_SET, f"{stat} is set, not incremented"
    for stat in found["inc_value"]:
        assert not is_gauge(stat), f"{stat} is incremented: a counter"


def test_families_of_no_stats_are_declared_and_valid() -> None:
    families = crawlproject_stat_families({}, "web", "w1")
    names = {family.name for family in families}
    assert "crawlproject_downloader_responses" in names  # declared, no samples yet
    assert "crawlproject_store_pages" in names  # a counter from 0
