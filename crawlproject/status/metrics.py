"""A worker's Scrapy stats as Prometheus metrics, named and typed as Prometheus expects.

Read at scrape time by a prometheus-client collector (``StatsExporter``); the
status reporter serves it on ``CRAWL_METRICS_ADDRESS:CRAWL_METRICS_PORT``.
``crawlproject_stat_families`` is the pure mapping, for tests and tools.

**Names.** ``crawlproject_`` + the stat with ``/`` and every other character
outside ``[a-z0-9_]`` as ``_`` (camelCase split, lower case): ``store/pages`` ->
``crawlproject_store_pages_total``. A counter's trailing ``_count`` goes (a
counter ends in ``_total``, never ``_count_total``). A name token that
promtool's lint takes for an abbreviated or non-base unit (``s``, ``ms``, ``kb``,
``minutes``, ...) or a metric type (``counter``, ``gauge``, ...), and a gauge's
trailing ``total``/``count``/``sum``/``bucket``, are joined to the token before
them, so no stat can make a name promtool complains about. Units where they
apply: ``_bytes``, ``_seconds`` (``memusage/max`` -> ``..._memusage_max_bytes``).

**Labels.** Every sample carries ``crawl`` and ``worker``. A stat whose last
part is a value (``downloader/response_status_count/200``, an exception class,
a reason) is a sample of a family with that value as a label (``LABELLED``):
``crawlproject_downloader_responses_total{status="200"}``. A stat that is only
the sum of such a family (``downloader/response_count``) is not exported
(``SUMS``: ``sum without (status)`` gives it). Label values come only from the
stats, so the number of series is the number of stats: bounded as they are.

**Counter or gauge, the rule.** Scrapy stats are counts of events
(``inc_value``): every numeric stat is a counter, whatever its prefix (new
ones included), except levels, which are gauges: the stats in ``GAUGE_STATS``
(set with ``set_value``: spool bytes, files pending, paused), those under
``GAUGE_PREFIXES`` (``memusage/``, ``memdebug/``), those ending in ``GAUGE_SUFFIXES``
(``_max``, ``_min``, ``_per_minute``, ``_per_second``) and times
(``start_time`` -> ``crawlproject_start_time_seconds``, Unix time).
tests/test_metrics_names.py checks that every ``set_value``/``max_value`` stat
of the code base is a gauge or a declared monotonic one (``MONOTONIC_SET``).
Besides the stats, the reporter adds a few live gauges (``LIVE_GAUGES``:
requests in flight, the fleet's queued and leased URLs).
"""

from __future__ import annotations

import asyncio
import datetime
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

PREFIX = "crawlproject"
TARGET_LABELS = ("crawl", "worker")

# stat prefix -> (family without the prefix nor _total, label name, what it counts).
# Longest prefixes first where one is inside another (checked in order).
LABELLED: tuple[tuple[str, str, str, str], ...] = (
    ("downloader/response_status_count/", "downloader_responses", "status",
     "Responses downloaded, by HTTP status"),
    ("downloader/exception_type_count/", "downloader_exceptions", "exception",
     "Download exceptions, by exception class"),
    ("downloader/request_method_count/", "downloader_requests", "method",
     "Requests sent, by HTTP method"),
    ("robotstxt/response_status_count/", "robotstxt_responses", "status",
     "robots.txt responses, by HTTP status"),
    ("robotstxt/exception_count/", "robotstxt_exceptions", "exception",
     "robots.txt fetches that failed, by exception"),
    ("httperror/response_ignored_status_count/", "httperror_ignored_responses", "status",
     "Responses not given to the spider (HttpErrorMiddleware), by status"),
    ("item_dropped_reasons_count/", "item_dropped_by_reason", "reason",
     "Items dropped by a pipeline, by exception"),
    ("spider_exceptions/", "spider_exceptions", "exception",
     "Exceptions raised in spider callbacks, by class"),
    ("log_count/", "log_messages", "level", "Log messages, by level"),
    ("retry/reason_count/", "retries", "reason", "Requests retried, by reason"),
    ("request_depth_count/", "requests_by_depth", "depth", "Requests, by link depth"),
    ("file_status_count/", "files", "status", "Files pipeline downloads, by status"),
    ("web/error/", "web_errors", "exception", "Failed fetches seen by the spider, by exception"),
    ("rules/", "rules_refused", "reason", "URLs refused by a URL rule, by rule"),
    ("trap/", "trap", "reason", "Spider-trap guard events (URLs not queued, probes), by guard"),
    ("limits/", "limits_reached", "reason", "Fetches stopped by a size/time limit, by limit"),
    ("content/error/", "content_errors", "processor", "Content processor failures"),
    ("content/processed/", "content_processed", "processor", "Answers read by a content processor"),
    ("content/unprocessed/", "content_unprocessed", "content_type",
     "Answers no content processor reads, by MIME type"),
    ("store/skipped_content_type/", "store_skipped", "content_type",
     "Pages not stored for their Content-Type"),
    ("store/skipped_status/", "store_skipped_status", "status",
     "Answers not stored for their HTTP status (CRAWL_STORE_STATUSES)"),
    ("dedupe/checked/", "dedupe_checked", "verdict", "Pages checked for duplicates, by verdict"),
    ("dedupe/near/distance_", "dedupe_near", "distance",
     "Near-duplicates found, by SimHash distance"),
    ("frontier/outcome/", "frontier_outcomes", "outcome", "Leases ended, by outcome"),
    ("recrawl/verdict/", "recrawl_verdicts", "verdict", "Recrawls, by verdict"),
)  # fmt: skip
# Sums of a LABELLED family, incremented with it: sum() over the label gives them.
SUMS = frozenset({
    "downloader/request_count", "downloader/response_count", "downloader/exception_count",
    "robotstxt/response_count", "spider_exceptions/count", "retry/count",
    "item_dropped_count", "httperror/response_ignored_count", "file_count",
})  # fmt: skip

# Levels, not counts (see the rule in the docstring).
GAUGE_STATS = frozenset({
    "store/spool_bytes", "store/backpressure_paused", "store/files_pending",
    "store/files_spooled_at_close", "elapsed_time_seconds",
    "frontier/seen_urls", "frontier/seen_capacity_used", "frontier/seen_fp_rate_expected",
})  # fmt: skip
GAUGE_PREFIXES = ("memusage/", "memdebug/")
GAUGE_SUFFIXES = ("_max", "_min", "_per_minute", "_per_second")
# Set with set_value but only ever growing: counters all the same.
MONOTONIC_SET = frozenset({"store/backpressure_seconds", "render/seconds"})
# Names that would not say their unit.
RENAMES = {
    "memusage/max": "memusage_max_bytes",
    "memusage/startup": "memusage_startup_bytes",
    "store/backpressure_paused": "store_paused",
}
# The reporter's own gauges (not stats): family -> what it is.
LIVE_GAUGES = {
    "in_flight_requests": "Requests this worker has sent and not yet had an answer for",
    "frontier_queued_urls": "URLs queued in the crawl's frontier (the fleet's, as this worker "
    "last read it: max by (crawl))",
    "frontier_leased_urls": "URLs leased by the fleet's workers (in flight; as this worker last "
    "read it: max by (crawl))",
}
# Exported from the first scrape, before their first stat: an unlabelled
# counter at 0 (rate() sees its first increase), a labelled family empty.
ALWAYS = (
    "response_received_count", "store/pages", "store/bytes", "store/backpressure_pauses",
    "store/spool_bytes", "store/backpressure_paused", "dedupe/same_url_again",
    "frontier/enqueued", "frontier/seen_hits",
)  # fmt: skip

# promtool check metrics (client_golang promlint): tokens it flags in a name.
_LINT_ABBREVIATIONS = frozenset(
    ["s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"]
)
_LINT_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})
_LINT_BASE_UNITS = [
    "amperes", "bytes", "celsius", "grams", "joules", "meters", "metres", "seconds", "volts",
]  # fmt: skip
_LINT_OTHER_UNITS = [
    "minutes", "hours", "days", "weeks", "kelvin", "kelvins", "fahrenheit", "rankine",
    "inches", "yards", "miles", "bits", "calories", "pounds", "ounces",
]  # fmt: skip
_LINT_UNIT_PREFIXES = [
    "pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi",
    "mega", "mibi", "giga", "gibi", "tera", "tebi", "peta", "pebi",
]  # fmt: skip
_LINT_UNITS = frozenset(
    [p + u for p in _LINT_UNIT_PREFIXES for u in _LINT_BASE_UNITS + _LINT_OTHER_UNITS]
    + _LINT_OTHER_UNITS
)
_GAUGE_TAILS = frozenset({"total", "count", "sum", "bucket"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_INVALID = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Family:
    """Where a stat goes: a family (name without ``_total``) and its label."""

    name: str
    kind: str  # "counter" or "gauge"
    help: str
    label: str | None = None

    @property
    def exposed(self) -> str:
        """The name in /metrics (prometheus-client adds ``_total`` to a counter)."""
        return self.name + "_total" if self.kind == "counter" else self.name


def snake(text: str) -> str:
    """``downloader/response_bytes`` -> ``downloader_response_bytes``; never a
    token promtool's lint flags (see the module docstring)."""
    tokens = [t for t in _INVALID.split(_CAMEL.sub("_", text).lower()) if t]
    out: list[str] = []
    for token in tokens:
        if out and (token in _LINT_ABBREVIATIONS or token in _LINT_TYPES or token in _LINT_UNITS):
            out[-1] += token
        else:
            out.append(token)
    return "_".join(out)


def family_name(base: str, kind: str) -> str:
    """``crawlproject_`` + ``base``, with the suffix rules of its kind."""
    tokens = snake(f"{PREFIX}_{base}").split("_")
    if kind == "counter":
        while len(tokens) > 2 and tokens[-1] in ("count", "total"):
            tokens.pop()  # _total comes back with the exposition
    elif len(tokens) > 1 and tokens[-1] in _GAUGE_TAILS:
        tokens[-2:] = [tokens[-2] + tokens[-1]]
    return "_".join(tokens)


def is_gauge(stat: str) -> bool:
    return stat in GAUGE_STATS or stat.startswith(GAUGE_PREFIXES) or stat.endswith(GAUGE_SUFFIXES)


@lru_cache(maxsize=4096)
def map_stat(stat: str) -> tuple[Family, str | None] | None:
    """The family of stat ``stat`` and its label value; None: not exported (a sum)."""
    if stat in SUMS:
        return None
    for prefix, base, label, text in LABELLED:
        if stat.startswith(prefix) and len(stat) > len(prefix):
            return Family(family_name(base, "counter"), "counter", text, label), stat[len(prefix) :]
    kind = "gauge" if is_gauge(stat) else "counter"
    return Family(family_name(RENAMES.get(stat, stat), kind), kind, f"Scrapy stat {stat}"), None


def _timestamp(stat: str) -> tuple[Family, None]:
    """A datetime stat (``start_time``, ``finish_time``): a gauge of Unix time."""
    name = family_name(stat if stat.endswith("_seconds") else stat + "_seconds", "gauge")
    return Family(name, "gauge", f"Scrapy stat {stat} (Unix time)"), None


def _number(value: object) -> float | None:
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, datetime.datetime):  # start_time
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return value.timestamp()
    return None  # finish_reason and other text


@dataclass(slots=True)
class _Built:
    family: Family
    samples: dict[str | None, float] = field(default_factory=dict)


def crawlproject_stat_families(
    stats: Mapping[str, Any],
    crawl: str,
    worker: str,
    live: Mapping[str, float] | None = None,
) -> list[Metric]:
    """The families of ``stats`` (a worker's Scrapy stats) and ``live`` gauges
    (``LIVE_GAUGES`` names), every sample labelled with ``crawl`` and ``worker``."""
    built: dict[str, _Built] = {}

    def add(family: Family, label: str | None, value: float) -> None:
        entry = built.setdefault(family.name, _Built(family))
        if entry.family.kind != family.kind or entry.family.label != family.label:
            return  # two unrelated stats collide on a name: the first one stays
        entry.samples[label] = entry.samples.get(label, 0.0) + value

    for stat in ALWAYS:
        mapped = map_stat(stat)
        if mapped is not None and mapped[1] is None:
            add(mapped[0], None, 0.0)
    for _, base, label, text in LABELLED:
        name = family_name(base, "counter")
        built.setdefault(name, _Built(Family(name, "counter", text, label)))
    for stat, raw in sorted(stats.items()):
        value = _number(raw)
        mapped = map_stat(stat) if not isinstance(raw, datetime.datetime) else _timestamp(stat)
        if value is not None and mapped is not None:
            add(mapped[0], mapped[1], value)
    for base, text in LIVE_GAUGES.items():
        if live is not None and base in live:
            add(Family(family_name(base, "gauge"), "gauge", text), None, float(live[base]))
    return list(_families(built.values(), crawl, worker))


def _families(built: Iterable[_Built], crawl: str, worker: str) -> Iterator[Metric]:
    for entry in sorted(built, key=lambda e: e.family.name):
        family = entry.family
        labels = [*TARGET_LABELS, *([family.label] if family.label else [])]
        metric: CounterMetricFamily | GaugeMetricFamily
        if family.kind == "counter":
            metric = CounterMetricFamily(family.name, family.help, labels=labels)
        else:
            metric = GaugeMetricFamily(family.name, family.help, labels=labels)
        for label, value in sorted(entry.samples.items(), key=lambda kv: kv[0] or ""):
            metric.add_metric([crawl, worker, *([label] if label is not None else [])], value)
        yield metric


class StatsExporter:
    """A prometheus-client collector: the worker's stats, read at each scrape.

    ``target`` gives the (crawl, worker) labels, ``live`` the live gauges."""

    def __init__(
        self,
        stats: Callable[[], Mapping[str, Any]],
        target: Callable[[], tuple[str, str]],
        live: Callable[[], Mapping[str, float]],
    ) -> None:
        self.stats = stats
        self.target = target
        self.live = live

    def describe(self) -> list[Metric]:
        return []  # nothing fixed: the registry must not collect at registration

    def collect(self) -> list[Metric]:
        crawl, worker = self.target()
        return crawlproject_stat_families(dict(self.stats()), crawl, worker, self.live())


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape in progress never holds the worker's exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Not a line on stderr per scrape."""


class _Counted:
    """A WSGI body that reports when it has been sent: the server closes the
    body after its last byte went out."""

    def __init__(self, body: Iterable[bytes], done: Callable[[], None]) -> None:
        self.body, self.done = body, done

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        self.done()


class MetricsServer:
    """``/metrics`` over HTTP, in a thread of its own (prometheus-client's WSGI
    app, a registry of its own: nothing process-global)."""

    def __init__(self, address: str, port: int, exporter: StatsExporter) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(exporter)
        app = make_wsgi_app(registry)
        self._lock = threading.Lock()
        self._started = 0  # scrapes begun (each one's number)
        self._sent = 0  # the highest number of a scrape answered in full

        def counted(environ: dict[str, Any], start_response: Any) -> _Counted:
            with self._lock:
                self._started += 1
                number = self._started
            return _Counted(app(environ, start_response), lambda: self._done(number))

        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        server_class = type("_Server", (_Server,), {"address_family": family})
        self.httpd: WSGIServer = make_server(address, port, counted, server_class, _QuietHandler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="metrics-server", daemon=True
        )
        self.thread.start()

    def _done(self, number: int) -> None:
        with self._lock:
            self._sent = max(self._sent, number)

    def next_scrape(self) -> int:
        """The number the next scrape to begin will have."""
        with self._lock:
            return self._started + 1

    async def linger(self, seconds: float, first: int) -> bool:
        """Serves on until scrape number ``first`` (:meth:`next_scrape`, taken
        before the linger is announced) or a later one has been answered, at
        most ``seconds``: a worker's last counts reach Prometheus. True if so."""
        deadline = time.monotonic() + seconds
        while self._sent < first:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
