"""The recrawl service: moves URLs that are due again into the frontier.

``crawlproject recrawl`` runs it (any number at once, on any machines: a URL
leaves the due schedule in the same atomic script that queues it, so it is
queued once). Each pass walks every shard and promotes batches of
``CRAWL_RECRAWL_BATCH`` due URLs until none is due or the shard holds
``CRAWL_RECRAWL_MAX_QUEUED`` queued URLs (a recrawl backlog must not bury the
URLs the crawl discovers); then it sleeps ``CRAWL_RECRAWL_POLL_SECONDS``.
``everything`` (``--all``) promotes every tracked URL whatever its due time:
an operator's forced refresh.

The requests it queues call the spider's ``callback`` / ``errback`` by name
(the ``web`` spider's ``parse`` and ``on_error`` by default), like any stored
request; workers of the crawl (``-a mode=continuous`` keeps them up) fetch them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from crawlproject.recrawl.config import RecrawlConfig
from crawlproject.recrawl.store import Backlog, RecrawlStore

logger = logging.getLogger(__name__)

# A pass stops after this many batches per shard, so that one shard with a huge
# backlog cannot hold the others back for long.
MAX_BATCHES_PER_SHARD_PASS = 100


@dataclass
class PassResult:
    promoted: int = 0
    lost: int = 0
    full_shards: int = 0  # shards that stopped at CRAWL_RECRAWL_MAX_QUEUED


class RecrawlService:
    def __init__(
        self,
        store: RecrawlStore,
        config: RecrawlConfig,
        default_delay_ms: int,
        default_concurrency: int,
        callback: str = "parse",
        errback: str = "on_error",
    ) -> None:
        self.store = store
        self.config = config
        self.default_delay_ms = default_delay_ms
        self.default_concurrency = default_concurrency
        self.callback = callback
        self.errback = errback

    async def run_pass(self, everything: bool = False) -> PassResult:
        """One walk over all shards."""
        result = PassResult()
        now_s = int(time.time())
        for shard in range(self.store.keys.shards):
            for _ in range(MAX_BATCHES_PER_SHARD_PASS):
                step = await self.store.promote(
                    shard, now_s, self.config.batch, self.config.max_queued,
                    self.default_delay_ms, self.default_concurrency, self.callback,
                    self.errback, everything=everything,
                )  # fmt: skip
                result.promoted += step.promoted
                result.lost += step.lost
                if step.promoted + step.lost < self.config.batch:
                    if step.due_left and not everything:
                        result.full_shards += 1  # due URLs left: no room in the frontier
                    break
        if result.promoted or result.lost:
            logger.info(
                "Promoted %d URL(s) for recrawl (%d schedule entries without a state dropped)",
                result.promoted,
                result.lost,
            )
        if result.full_shards:
            logger.info(
                "%d shard(s) hold CRAWL_RECRAWL_MAX_QUEUED (%d) queued URLs: due URLs wait",
                result.full_shards,
                self.config.max_queued,
            )
        return result

    async def run(self, stop: asyncio.Event) -> PassResult:
        """Passes until ``stop`` is set; a pass that promoted nothing sleeps first."""
        total = PassResult()
        while not stop.is_set():
            step = await self.run_pass()
            total.promoted += step.promoted
            total.lost += step.lost
            if step.promoted == 0 or step.full_shards:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.config.poll_seconds)
        return total

    async def backlog(self) -> Backlog:
        return await self.store.backlog(time.time())
