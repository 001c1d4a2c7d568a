"""Each worker's share of the fleet's status: counters in Redis, metrics, a progress line.

A Scrapy extension (``EXTENSIONS``), on with the frontier scheduler. Every
``CRAWL_STATUS_REPORT_SECONDS`` it

* adds the increments of its counters since the last report to the crawl's
  ``stats`` hash (the fleet's totals: ``crawlproject status`` reads them), and
  its responses to the current 10-second bucket of ``tp`` (throughput);
* writes its gauges to ``w:<worker>`` (responses/s, requests in flight, WARC
  files waiting for upload, bytes spooled, paused for a full spool),
  expiring when it stops reporting;
* with a terminal on stderr (``CRAWL_PROGRESS = "auto"``), rewrites one line:
  pages/s, the fleet's queue and errors, instead of waiting for Scrapy's
  once-a-minute log line; plain logs otherwise.

With ``CRAWL_METRICS_PORT`` set, it also serves the worker's own stats as
Prometheus metrics on ``CRAWL_METRICS_ADDRESS:CRAWL_METRICS_PORT``
(crawlproject/status/metrics.py: names, labels, counter or gauge), labelled
with the crawl and this worker; at the end of the crawl it keeps serving them
until one more scrape took the final counts, at most
``CRAWL_METRICS_LINGER_SECONDS``.

The fleet's counters in Redis are the stats under ``COUNTER_PREFIXES``: they
only grow, so the fleet's sums are exact. Redis errors skip a report (it is
sent again, under its call id, before the next one: status/fleet_counters.py,
never added twice); they never stop the crawl.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from redis.exceptions import RedisError
from scrapy import signals
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from crawlproject.component_off import switched_off
from crawlproject.frontier.crawl.crawl_name import crawl_name
from crawlproject.frontier.scrapy_glue.frontier_lookup import (
    crawl_redis_of,
    frontier_closing,
    frontier_of,
    is_frontier,
)
from crawlproject.frontier.store.budgets import waiting_over_budget
from crawlproject.setting_values import ConfigError, Setting, crawl_setting, read_config
from crawlproject.status.fleet_counters import FleetCounters
from crawlproject.status.hosts import HostTally
from crawlproject.status.metrics import MetricsServer, StatsExporter

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# Stats that only ever grow (Scrapy's and ours): summed over the fleet.
COUNTER_PREFIXES = (
    "downloader/request_count",
    "downloader/response_count",
    "downloader/response_status_count/",
    "downloader/exception_count",
    "downloader/exception_type_count/",
    "downloader/response_bytes",
    "response_received_count",
    "item_scraped_count",
    "item_dropped_count",
    "log_count/ERROR",
    "log_count/WARNING",
    "robotstxt/",
    "dedupe/",
    "store/pages",
    "store/bytes",
    "store/files_uploaded",
    "store/bytes_uploaded",
    "store/objects_",
    "store/skipped_content_type/",
    "store/skipped_status/",
    "store/backpressure_pauses",
    "store/backpressure_seconds",
    "store/write_failed",
    "store/render_resources",
    "render/",
    "recrawl/",
    "trap/",
    "sitemap/",
    "web/error/",
    "content/",
    "frontier/enqueued",
    "frontier/acks",
    "frontier/claims",
    "frontier/seen_hits",
    "dns/",
)
PAGES_STAT = "response_received_count"
ERRORS_STATS = ("downloader/exception_count", "log_count/ERROR")
EXCEPTION_TYPE_PREFIX = "downloader/exception_type_count/"
# Raised by downloader middlewares as decisions, not failures (a robots.txt
# refusal, a URL put back while its host's robots.txt is fetched): Scrapy
# counts them as download exceptions; they have stats of their own.
NOT_ERRORS = ("RobotsForbidden", "RobotsDeferred")
THROUGHPUT_BUCKET_SECONDS = 10
THROUGHPUT_KEEP_SECONDS = 3600  # the status page charts the last hour: 360 buckets
GAUGES_TTL_REPORTS = 3  # a worker's gauges outlive it by this many report periods
PROGRESS_MODES = ("auto", "on", "off")


@dataclass(frozen=True, slots=True)
class StatusReporterConfig:
    report_seconds: Annotated[float, Setting("CRAWL_STATUS_REPORT_SECONDS")]
    progress: str  # CRAWL_PROGRESS, lower case
    metrics_port: Annotated[int, Setting("CRAWL_METRICS_PORT")]
    metrics_address: Annotated[str, Setting("CRAWL_METRICS_ADDRESS")]
    metrics_linger_seconds: Annotated[float, Setting("CRAWL_METRICS_LINGER_SECONDS")]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> StatusReporterConfig:
        progress = str(crawl_setting(settings, "CRAWL_PROGRESS")).lower()
        return read_config(cls, settings, progress=progress)

    def validate(self) -> None:
        if self.report_seconds <= 0:
            raise ConfigError("CRAWL_STATUS_REPORT_SECONDS must be > 0")
        if self.progress not in PROGRESS_MODES:
            raise ConfigError(f"CRAWL_PROGRESS must be one of {PROGRESS_MODES}")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError("CRAWL_METRICS_PORT must be 0 (off) or a TCP port")
        if self.metrics_linger_seconds < 0:
            raise ConfigError("CRAWL_METRICS_LINGER_SECONDS must be >= 0")


def is_counter(name: str) -> bool:
    return name.startswith(COUNTER_PREFIXES)


class StatusReporter:
    def __init__(self, crawler: Crawler, config: StatusReporterConfig, stats: StatsCollector):
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self._counters: FleetCounters | None = None  # the fleet's stats: this worker's share
        self._last_pages = 0
        self._last_time = 0.0
        self._rate = 0.0
        self._fleet: dict[str, int] | None = None  # frontier counters, as of the last report
        self._target: tuple[str, str] | None = None  # crawl, worker: the metrics' labels
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._metrics_server: MetricsServer | None = None
        self._progress = config.progress == "on" or (
            config.progress == "auto" and sys.stderr.isatty()
        )
        self._progress_shown = False
        self.hosts = HostTally()  # busiest and failing hosts (crawlproject/status/hosts.py)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatusReporter:
        if not is_frontier(load_object(crawler.settings["SCHEDULER"])):
            why = "the fleet status needs the frontier scheduler"
            raise switched_off(cls, crawler.settings, why, "SCHEDULER")
        assert crawler.stats is not None
        reporter = cls(crawler, StatusReporterConfig.from_settings(crawler.settings), crawler.stats)
        crawler.signals.connect(reporter._opened, signal=signals.spider_opened)
        crawler.signals.connect(reporter._closing, signal=frontier_closing)
        crawler.signals.connect(reporter._closed, signal=signals.spider_closed)
        reporter.hosts.connect(crawler.signals)
        return reporter

    # -- lifecycle --------------------------------------------------------------------

    def _opened(self, spider: Any) -> None:
        if self.config.metrics_port:
            self._start_metrics()
        self._last_time = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def _start_metrics(self) -> None:
        exporter = StatsExporter(self.stats.get_stats, self._metrics_target, self._live_gauges)
        self._metrics_server = MetricsServer(
            self.config.metrics_address, self.config.metrics_port, exporter
        )
        logger.info(
            "Prometheus metrics on http://%s:%d/metrics",
            self.config.metrics_address,
            self.config.metrics_port,
        )

    async def _closing(self) -> None:
        """The frontier closes: a last report while its Redis is open."""
        if self._task is not None:
            # Asked to stop, not cancelled: a cancellation in the middle of a
            # redis-py call can be swallowed (the frontier's loops stop alike).
            self._stop.set()
            await self._task
            self._task = None
        await self._report()
        self._finish_line()

    def _finish_line(self) -> None:
        """The frontier as this worker leaves it, with what waits over budget."""
        fleet = self._fleet
        if fleet is None:
            return
        waiting = waiting_over_budget(fleet)
        logger.info(
            "Frontier at close: %d URLs queued, %d leased, %d done, %d waiting over their "
            "host's budget%s",
            fleet.get("queued", 0),
            fleet.get("leased", 0),
            fleet.get("done", 0),
            waiting,
            " (crawlproject budget; --release lets them in)" if waiting else "",
        )

    def _metrics_target(self) -> tuple[str, str]:
        """The crawl and worker labels (the frontier's, once it is connected)."""
        if self._target is None:
            scheduler = frontier_of(self.crawler)
            shared = scheduler.crawl_redis
            if shared is None:
                return crawl_name(self.crawler.spider, self.crawler.settings), scheduler.worker_id
            self._target = (shared.keys.crawl, shared.worker_id)
        return self._target

    def _live_gauges(self) -> dict[str, float]:
        engine = self.crawler.engine
        live = {"in_flight_requests": float(len(engine.downloader.active) if engine else 0)}
        if self._fleet is not None:
            live["frontier_queued_urls"] = self._fleet.get("queued", 0)
            live["frontier_leased_urls"] = self._fleet.get("leased", 0)
        return live

    async def _closed(self, spider: Any, reason: str) -> None:
        if self._progress_shown:
            sys.stderr.write("\n")
        server = self._metrics_server
        if server is None:
            return
        if self.config.metrics_linger_seconds > 0:
            # Counted from before the line below: a scraper that reads it and
            # scrapes at once must not be taken for one that came before it.
            first = server.next_scrape()
            logger.info(
                "Final metrics on http://%s:%d/metrics until scraped once more (at most %g s)",
                self.config.metrics_address,
                self.config.metrics_port,
                self.config.metrics_linger_seconds,
            )
            if not await server.linger(self.config.metrics_linger_seconds, first):
                logger.info("Final metrics not scraped in CRAWL_METRICS_LINGER_SECONDS")
        server.close()

    async def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.config.report_seconds)
            if self._stop.is_set():
                return
            await self._report()
            if self._progress:
                self._show_progress()

    # -- one report -------------------------------------------------------------------

    async def _report(self) -> None:
        scheduler = self.crawler.engine.scheduler if self.crawler.engine else None
        if not is_frontier(scheduler):
            return
        shared, frontier = crawl_redis_of(self.crawler), frontier_of(self.crawler).frontier
        if shared is None or frontier is None:
            return
        now = time.monotonic()
        counters = {k: v for k, v in self.stats.get_stats().items() if _is_int(v) and is_counter(k)}
        pages = counters.get(PAGES_STAT, 0)
        elapsed = max(now - self._last_time, 1e-6)
        self._rate = (pages - self._last_pages) / elapsed
        keys, worker = shared.keys, shared.worker_id
        wall = time.time()
        bucket = int(wall) // THROUGHPUT_BUCKET_SECONDS * THROUGHPUT_BUCKET_SECONDS
        if self._counters is None:
            self._counters = FleetCounters(shared.redis, keys, PAGES_STAT)
        pipe = shared.redis.pipeline(transaction=False)
        gauges: dict[str | bytes, float] = {
            "responses_per_second": round(self._rate, 3),
            "in_flight": len(self.crawler.engine.downloader.active) if self.crawler.engine else 0,
            "store_files_pending": int(self.stats.get_value("store/files_pending", 0) or 0),
            # Backpressure (store/backpressure.py): bytes spooled, 1 while paused for them.
            "store_spool_bytes": int(self.stats.get_value("store/spool_bytes", 0) or 0),
            "store_paused": int(self.stats.get_value("store/backpressure_paused", 0) or 0),
            "reported_at": round(wall, 3),
        }
        pipe.hset(keys.worker_gauges(worker), mapping=gauges)  # type: ignore[arg-type]
        pipe.expire(
            keys.worker_gauges(worker), int(self.config.report_seconds * GAUGES_TTL_REPORTS) + 1
        )
        self.hosts.add_to(pipe, keys.host_reports, worker, wall)
        pipe.hkeys(keys.throughput)
        try:
            await self._counters.report(counters, bucket)
            replies = await pipe.execute()
            self._fleet = await frontier.counters()
        except RedisError as exc:
            logger.debug("Status report skipped: %s", exc)
            return
        self._last_pages, self._last_time = pages, now
        old = [f for f in replies[-1] if int(f) < wall - THROUGHPUT_KEEP_SECONDS]
        if old:
            with contextlib.suppress(RedisError):
                await shared.redis.hdel(keys.throughput, *old)
        await self.hosts.prune(shared.redis, keys.host_reports, wall)

    def _show_progress(self) -> None:
        errors = error_count(self.stats.get_stats())
        pages = int(self.stats.get_value(PAGES_STAT, 0) or 0)
        queued = "?" if self._fleet is None else f"{self._fleet.get('queued', 0):,}"
        line = f"{self._rate:7.1f} pages/s | {pages:,} pages | queue {queued} | errors {errors:,}"
        sys.stderr.write("\r" + line.ljust(72))
        sys.stderr.flush()
        self._progress_shown = True


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def error_count(stats: Mapping[str, Any]) -> int:
    """Errors among a worker's or the fleet's stats: download exceptions and
    ERROR log lines, without the decisions in ``NOT_ERRORS``."""
    errors = sum(int(stats.get(k, 0) or 0) for k in ERRORS_STATS)
    for key, value in stats.items():
        if key.startswith(EXCEPTION_TYPE_PREFIX) and key.rsplit(".", 1)[-1] in NOT_ERRORS:
            errors -= int(value or 0)
    return errors
