"""Diagnostic Scrapy extension: a crawler-side timeline of the frontier, for
bench/crawl_rate.py ``--part trace``. It edits nothing: it wraps the methods of
the running scheduler's RedisFrontier instance and listens to Scrapy signals.

    scrapy crawl web ... -s 'EXTENSIONS={"bench.crawl_trace.FrontierTrace": 0}' \\
        -s CRAWL_TRACE_PATH=trace.jsonl

Writes one JSON object per line (``time.time()`` clock, comparable with the
test web's server log):

* ``{"k": "call", "op": "claim"|"release"|"add"|"ack", "t0", "t1", "n", "tokens"}``
  every frontier script call (tokens: leases claimed or released);
* ``{"k": "sig", "s": "popped"|"reached"|"received", "t", "url", "token"}`` when
  the engine takes a request from the scheduler / it reaches the downloader
  (past the downloader middlewares' process_request) / its response is received;
* ``{"k": "lag", ...}``: event loop lag, sampled by a task that asks to wake
  every 10 ms (p50/p90/p99/max of how late it woke, and the samples over 20 ms).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response

from crawlproject.frontier.basics.request_meta import LEASE_META_KEY

TICK = 0.01


class FrontierTrace:
    def __init__(self, crawler: Crawler, path: str) -> None:
        self.crawler = crawler
        self.path = path
        self.events: list[dict[str, Any]] = []
        self.lags: list[tuple[float, float]] = []
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierTrace:
        path = crawler.settings.get("CRAWL_TRACE_PATH")
        if not path:
            raise NotConfigured("CRAWL_TRACE_PATH not set")
        ext = cls(crawler, path)
        crawler.signals.connect(ext.spider_opened, signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signals.spider_closed)
        crawler.signals.connect(ext.reached, signals.request_reached_downloader)
        crawler.signals.connect(ext.received, signals.response_received)
        return ext

    def spider_opened(self, spider: Any) -> None:
        engine = self.crawler.engine
        scheduler = engine._slot.scheduler if engine and engine._slot else None
        frontier = getattr(scheduler, "frontier", None)
        if frontier is not None:
            for op in ("claim", "release", "add", "ack"):
                setattr(frontier, op, self._wrap(op, getattr(frontier, op)))
        if scheduler is not None:
            scheduler.next_request = self._wrap_next(scheduler.next_request)  # type: ignore[method-assign]
        self._task = asyncio.ensure_future(self._lag_loop())

    def _wrap(self, op: str, fn: Any) -> Any:
        events = self.events

        async def traced(*args: Any, **kwargs: Any) -> Any:
            t0 = time.time()
            result = await fn(*args, **kwargs)
            t1 = time.time()
            ev: dict[str, Any] = {"k": "call", "op": op, "t0": t0, "t1": t1}
            if op == "claim":
                ev["tokens"] = [lease.token for lease, _ in result.items]
                ev["shard"] = result.shard
                ev["next_in"] = (
                    None
                    if result.next_ready_ms is None
                    else (result.next_ready_ms - result.now_ms) / 1000
                )
            elif op == "release":  # Release records
                ev["tokens"] = [r.lease.token for r in args[0]]
            elif op == "ack":
                ev["tokens"] = [lease.token for lease in args[0]]
            elif op == "add":
                ev["n"] = len(args[0]) if hasattr(args[0], "__len__") else None
            events.append(ev)
            return result

        return traced

    def _wrap_next(self, fn: Any) -> Any:
        """The engine took a request from the scheduler ("popped")."""
        events = self.events

        def traced() -> Any:
            request = fn()
            if request is not None:
                events.append(
                    {
                        "k": "sig",
                        "s": "popped",
                        "t": time.time(),
                        "url": request.url,
                        "token": request.meta.get(LEASE_META_KEY),
                    }
                )
            return request

        return traced

    async def _lag_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            want = loop.time() + TICK
            await asyncio.sleep(TICK)
            self.lags.append((time.time(), loop.time() - want))

    def reached(self, request: Request, spider: Any) -> None:
        self.events.append(
            {
                "k": "sig",
                "s": "reached",
                "t": time.time(),
                "url": request.url,
                "token": request.meta.get(LEASE_META_KEY),
            }
        )

    def received(self, response: Response, request: Request, spider: Any) -> None:
        self.events.append(
            {
                "k": "sig",
                "s": "received",
                "t": time.time(),
                "url": request.url,
                "token": request.meta.get(LEASE_META_KEY),
            }
        )

    def spider_closed(self, spider: Any) -> None:
        if self._task is not None:
            self._task.cancel()
        lags = sorted(lag for _, lag in self.lags)

        def q(p: float) -> float | None:
            return lags[min(len(lags) - 1, int(p * len(lags)))] if lags else None

        with open(self.path, "w", encoding="utf-8") as fh:
            for ev in self.events:
                fh.write(json.dumps(ev) + "\n")
            fh.write(
                json.dumps(
                    {
                        "k": "lag",
                        "samples": len(lags),
                        "p50": q(0.5),
                        "p90": q(0.9),
                        "p99": q(0.99),
                        "max": lags[-1] if lags else None,
                        "over_20ms": [(t, lag) for t, lag in self.lags if lag > 0.02],
                    }
                )
                + "\n"
            )
