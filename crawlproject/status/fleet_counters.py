"""A worker's counters added to the fleet's, each increment once.

Every report adds the increments of the worker's counters since its last
report to the crawl's ``stats`` hash, and its new responses to the current
bucket of ``tp`` (crawlproject/status/reporter.py). A report that failed
is sent again, as it was and under its call id, before the next one's
increments (crawlproject/increments.py): if its reply was lost after Redis
ran it, the resend answers the first run's reply and adds nothing. Before,
a failed report's increments went again with the next one's, and a lost
reply (or redis-py's cluster client sending the report again itself) added
them twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawlproject.increments import Increment, Increments
from crawlproject.lua import CALL_IDS

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from crawlproject.frontier.store.keys import CrawlKeys


@dataclass(frozen=True, slots=True)
class _Report:
    call: str  # its call id, kept for its resends
    increments: list[Increment]
    counters: dict[str, int]  # the counters it brings up to date


class FleetCounters:
    """Adds a worker's counters to the fleet's ``stats`` (and its responses,
    ``pages``, to ``tp``), once."""

    def __init__(self, redis: Redis, keys: CrawlKeys, pages: str) -> None:
        self.keys = keys
        self.pages = pages
        self.reported: dict[str, int] = {}  # the counters as of the last report Redis took
        self._increments = Increments(redis)
        self._unsent: _Report | None = None

    async def report(self, counters: Mapping[str, int], bucket: int) -> None:
        """Adds the increments of ``counters`` since the last report taken, its
        responses to ``tp`` bucket ``bucket``; a report that failed first.
        Raises the RedisError of a report not taken (it is sent again next time)."""
        if self._unsent is not None:
            await self._send(self._unsent)
        deltas = {k: v - self.reported.get(k, 0) for k, v in counters.items()}
        deltas = {k: d for k, d in deltas.items() if d > 0}
        if not deltas:
            return
        increments: list[Increment] = [(self.keys.fleet_stats, k, d) for k, d in deltas.items()]
        if deltas.get(self.pages):
            increments.append((self.keys.throughput, str(bucket), deltas[self.pages]))
        self._unsent = _Report(CALL_IDS.new(), increments, {k: counters[k] for k in deltas})
        await self._send(self._unsent)

    async def _send(self, report: _Report) -> None:
        await self._increments.add(self.keys.crawl_call_reply(report.call), report.increments)
        self.reported.update(report.counters)
        self._unsent = None
