"""Each worker's busiest and failing hosts, for the status page (``crawlproject status``).

Scrapy's stats have no per-host figures, so the status reporter
(crawlproject/status/reporter.py) keeps a :class:`HostTally`: per page, one
counter in a dict (no parsing: Scrapy has already parsed and cached the
request's URL for its download slot). Every report it writes the worker's top
``HOST_REPORT_TOP`` hosts by pages and by errors, as one JSON field of the
crawl's ``hr`` hash (field: the worker id), so the fleet's view is one HGETALL
whatever the number of hosts.

Bounded: at most ``HOST_TALLY_MAX`` hosts are counted per worker; past that the
half with the fewest pages and errors is forgotten (their counts restart from
zero if they come back), so a crawl of millions of hosts costs a worker a few
MB at most and the figures stay exact for the busy ones. A worker's field
stays after it stops, so the page still shows the hosts of a finished crawl;
fields not refreshed for ``HOST_REPORT_KEEP_SECONDS`` are deleted by the other
workers' reports and ignored by the view.

An error is a fetch without an answer (timeout, refused, reset, DNS) or an
answer of 429 or 5xx; robots.txt refusals never reach the downloader and are
not counted.
"""

from __future__ import annotations

import contextlib
import heapq
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError
from scrapy import Request
from scrapy import signals as scrapy_signals
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from scrapy.signalmanager import SignalManager

HOST_TALLY_MAX = 10_000  # hosts counted per worker before the least busy half goes
HOST_REPORT_TOP = 20  # hosts per list in a worker's report
HOST_REPORT_KEEP_SECONDS = 3600  # a stopped worker's report is shown this long
HOST_VIEW_TOP = 10  # hosts per list on the status page
PRUNE_EVERY_SECONDS = 60
FAILED_STATUSES = range(500, 600)
THROTTLED_STATUS = 429


class HostTally:
    """Pages and errors per host (``host[:port]``) of one worker since it started."""

    def __init__(self, max_hosts: int = HOST_TALLY_MAX) -> None:
        self.max_hosts = max_hosts
        self.pages: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self._answered: set[int] = set()  # requests in the downloader that got a response
        self._pruned_at = 0.0

    # Scrapy signal handlers (connected by the status reporter).

    def response_downloaded(self, response: Response, request: Request, spider: Any) -> None:
        host = _host(request)
        self.pages[host] = self.pages.get(host, 0) + 1
        status = response.status
        if status == THROTTLED_STATUS or status in FAILED_STATUSES:
            self.errors[host] = self.errors.get(host, 0) + 1
        self._answered.add(id(request))
        if len(self.pages) > self.max_hosts:
            self._forget_least_busy()

    def request_left_downloader(self, request: Request, spider: Any) -> None:
        """Sent after ``response_downloaded`` for a request that got an answer,
        alone for one that did not."""
        if id(request) in self._answered:
            self._answered.discard(id(request))
            return
        host = _host(request)
        self.errors[host] = self.errors.get(host, 0) + 1
        if len(self.errors) > self.max_hosts:
            self._forget_least_busy()

    def _forget_least_busy(self) -> None:
        hosts = set(self.pages) | set(self.errors)
        keep = sorted(
            hosts, key=lambda h: self.pages.get(h, 0) + self.errors.get(h, 0), reverse=True
        )[: self.max_hosts // 2]
        kept = set(keep)
        self.pages = {h: n for h, n in self.pages.items() if h in kept}
        self.errors = {h: n for h, n in self.errors.items() if h in kept}

    def connect(self, signals: SignalManager) -> None:
        signals.connect(self.response_downloaded, signal=scrapy_signals.response_downloaded)
        signals.connect(self.request_left_downloader, signal=scrapy_signals.request_left_downloader)

    def report(self, at: float, top: int = HOST_REPORT_TOP) -> str:
        """This worker's top hosts by pages and by errors, each with both
        figures, as the JSON of its ``hr`` field."""
        hosts = dict.fromkeys(h for h, _ in _top(self.pages, top) + _top(self.errors, top))
        return json.dumps(
            {
                "at": round(at, 3),
                "hosts": {h: [self.pages.get(h, 0), self.errors.get(h, 0)] for h in hosts},
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    def add_to(self, pipe: Any, key: str, worker: str, at: float) -> None:
        """Queues this worker's report on the reporter's pipeline."""
        pipe.hset(key, worker, self.report(at))

    async def prune(self, redis: Redis, key: str, now: float) -> None:
        """Deletes stopped workers' reports older than ``HOST_REPORT_KEEP_SECONDS``
        (at most once a minute per worker: the hash has a field per worker)."""
        if now - self._pruned_at < PRUNE_EVERY_SECONDS:
            return
        self._pruned_at = now
        with contextlib.suppress(RedisError):
            stale = stale_fields(await redis.hgetall(key), now)
            if stale:
                await redis.hdel(key, *stale)


def _host(request: Request) -> str:
    """``host[:port]`` of the request's URL: never its user:password@ part."""
    netloc = urlparse_cached(request).netloc
    return netloc.rpartition("@")[2] if "@" in netloc else netloc


def _top(counts: Mapping[str, int], top: int) -> list[tuple[str, int]]:
    # A heap, not a sort: a report runs every few seconds over up to HOST_TALLY_MAX hosts.
    best = heapq.nsmallest(top, counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(h, n) for h, n in best if n > 0]


def stale_fields(reports: Mapping[bytes | str, bytes | str], now: float) -> list[bytes | str]:
    """The ``hr`` fields not refreshed for ``HOST_REPORT_KEEP_SECONDS`` (or unreadable)."""
    stale = []
    for worker, raw in reports.items():
        report = _parse(raw)
        if report is None or now - report["at"] > HOST_REPORT_KEEP_SECONDS:
            stale.append(worker)
    return stale


def merge_reports(
    reports: Iterable[bytes | str], now: float, top: int = HOST_VIEW_TOP
) -> dict[str, Any]:
    """The fleet's busiest and failing hosts from the workers' ``hr`` fields.

    Sums over the workers that reported within ``HOST_REPORT_KEEP_SECONDS``:
    exact for a host in every worker's top lists, a lower bound otherwise.
    """
    pages: dict[str, int] = {}
    errors: dict[str, int] = {}
    workers = 0
    for raw in reports:
        report = _parse(raw)
        if report is None or now - report["at"] > HOST_REPORT_KEEP_SECONDS:
            continue
        workers += 1
        for host, (p, e) in report["hosts"].items():
            pages[host] = pages.get(host, 0) + int(p)
            errors[host] = errors.get(host, 0) + int(e)

    def rows(by: dict[str, int]) -> list[dict[str, Any]]:
        return [
            {"host": h, "pages": pages.get(h, 0), "errors": errors.get(h, 0)}
            for h, _ in _top(by, top)
        ]

    return {"workers_reporting": workers, "busiest": rows(pages), "failing": rows(errors)}


def _parse(raw: bytes | str) -> dict[str, Any] | None:
    try:
        report = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(report, dict) or not isinstance(report.get("at"), int | float):
        return None
    if not isinstance(report.get("hosts"), dict):
        return None
    return report
