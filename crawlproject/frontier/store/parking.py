"""URLs set aside: a host's queue parked for a trap verdict, URLs reclaimed
too often (``poison``), and putting them back. Part of
:class:`crawlproject.frontier.store.redis_frontier.RedisFrontier`, which supplies the
connection, the keys and the script runner.
"""

from __future__ import annotations

from collections import defaultdict

from crawlproject.frontier.store.frontier_part import FrontierPart
from crawlproject.frontier.store.script_replies import entry_url, reply_bytes, reply_text

PARK_BATCH = 1000  # URLs per park_host / unpark call: bounds one script's run time


class ParkedUrls(FrontierPart):
    """The frontier's operations on set-aside URLs (a part of RedisFrontier)."""

    async def park_host(self, pkey: str, reason: str = "parked") -> int:
        """Sets a host's queued URLs aside (shard's ``parked`` list), and those
        added later, for ``reason`` (a word: ``duplicates``, ``dns``, ...);
        returns how many were queued."""
        shard = self.keys.shard_of(pkey)
        total = 0
        while True:
            n = int(await self._run("park_host", shard, pkey, PARK_BATCH, reason))
            total += n
            if n < PARK_BATCH:
                return total

    async def parked_by_host(self) -> dict[str, int]:
        """Parked URLs per host (politeness key), all shards."""
        counts: dict[str, int] = defaultdict(int)
        for shard in range(self.keys.shards):
            start = 0
            while batch := await self.redis.lrange(
                self.keys.parked(shard), start, start + PARK_BATCH - 1
            ):
                for entry in batch:
                    raw = entry if isinstance(entry, bytes) else entry.encode()
                    counts[raw.partition(b"\t")[0].decode("utf-8", "replace")] += 1
                start += len(batch)
        return dict(counts)

    async def poisoned_urls(self) -> list[str]:
        """URLs set aside after CRAWL_MAX_RECLAIMS reclaims (``poison`` lists), all shards."""
        urls: list[str] = []
        for shard in range(self.keys.shards):
            credit = await self.redis.get(self.keys.priority_mode(shard)) == b"credit"
            start = 0
            while batch := await self.redis.lrange(
                self.keys.poison(shard), start, start + PARK_BATCH - 1
            ):
                urls += [entry_url(reply_bytes(e), credit) for e in batch]
                start += len(batch)
        return urls

    async def trap_reasons(self) -> dict[str, dict[str, int]]:
        """Host -> reason -> URLs contained for it (parked, or over budget and
        waiting in the host's overflow), all shards; hosts with none left out."""
        out: dict[str, dict[str, int]] = defaultdict(dict)
        for shard in range(self.keys.shards):
            raw = await self.redis.hgetall(self.keys.trap_reasons(shard))
            for field_, value in raw.items():
                host, _, reason = reply_text(field_).rpartition("\t")
                if int(value) > 0:
                    out[host][reason] = int(value)
        return dict(out)

    async def unpark_all(self, list_name: str = "parked") -> int:
        """Puts every URL of the ``parked`` (trap verdicts) or ``poison``
        (reclaimed too often) lists back in its host queue; returns how many."""
        total = 0
        for shard in range(self.keys.shards):
            while True:
                n = int(
                    await self._run(
                        "unpark",
                        shard,
                        self.default_delay_ms,
                        self.default_concurrency,
                        PARK_BATCH,
                        list_name,
                    )
                )
                total += n
                if n < PARK_BATCH:
                    break
        return total
