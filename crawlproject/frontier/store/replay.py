"""URLs this worker queued lately, queued again when their shard's master changed.

A Redis Cluster master killed -9 loses the writes it acknowledged but had not
yet sent to its replica (asynchronous replication). An add of links can be
one of them, the links' seen marks with it; when the linking page's
acknowledgement went to another master and survived, no page left to fetch
may link to them again (docs/fleet.md). The worker that sent them still has
them: each add is kept for ``window`` seconds with the node its shard's slot
was on, and once this worker's client sees another node serve that slot (a
replica promoted, or the slot moved), the add is sent again. The seen set
makes that harmless: a URL that survived is a seen hit, a lost one is queued
again (``frontier/replayed_urls`` counts the URLs sent again).

Only plain URL entries are kept: credits and votes (counted, not seen-tested)
would count twice, and a ``dont_filter`` URL (no seen test) would be queued
twice. The window outlasts what a worker waits for a promotion (its outage
bound) plus a margin for its next call to that slot; its entries are bounded
(``max_entries``, the oldest dropped first).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable

from redis.asyncio.cluster import RedisCluster

from crawlproject.frontier.store.operation_values import NewEntry
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.redis_calls import node_of_key

logger = logging.getLogger(__name__)

REPLAY_MARGIN_SECONDS = 30.0  # beyond the outage bound: the worker's next call to the slot
REPLAY_MAX_ENTRIES = 200_000  # a worker's adds kept at most (~100-300 B each)


def shard_nodes(frontier: RedisFrontier, shards: Iterable[int]) -> dict[int, str]:
    """The node serving each shard's slot as this worker's client last learned
    it (no round trip); "" on one Redis, whose node never changes here."""
    redis = frontier.redis
    if not isinstance(redis, RedisCluster):
        return dict.fromkeys(shards, "")
    # "" when no node is known now: unknown, not changed
    return {shard: node_of_key(redis, frontier.keys.ready(shard)) for shard in shards}


class RecentAdds:
    """The URL entries this worker added in the last ``window`` seconds, by
    shard, with the node each shard's slot was on when its add was answered."""

    def __init__(
        self,
        window: float,
        max_entries: int = REPLAY_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window = window
        self.max_entries = max_entries
        self._clock = clock
        # (when, shard, node, entries), oldest first.
        self._adds: deque[tuple[float, int, str, list[NewEntry]]] = deque()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def note(self, frontier: RedisFrontier, entries: Iterable[NewEntry]) -> None:
        """Keeps the URL entries of an add that was answered just now (none on
        one Redis: its node never changes, nothing would be sent again)."""
        if not isinstance(frontier.redis, RedisCluster):
            return
        by_shard: dict[int, list[NewEntry]] = {}
        for e in entries:
            if e.credit_only or e.vote_only or e.dont_filter or not e.data:
                continue
            by_shard.setdefault(frontier.keys.shard_of(e.pkey), []).append(e)
        if not by_shard:
            return
        now = self._clock()
        nodes = shard_nodes(frontier, by_shard)
        for shard, kept in by_shard.items():
            self._adds.append((now, shard, nodes[shard], kept))
            self._count += len(kept)
        self._expire(now)

    def changed(self, frontier: RedisFrontier) -> list[NewEntry]:
        """The kept entries whose shard another node serves now (taken out:
        the caller adds them again, and keeps them again when answered)."""
        self._expire(self._clock())
        if not self._adds:
            return []
        now_nodes = shard_nodes(frontier, {shard for _, shard, _, _ in self._adds})
        again: list[NewEntry] = []
        kept: deque[tuple[float, int, str, list[NewEntry]]] = deque()
        moved: dict[int, tuple[str, str]] = {}
        for add in self._adds:
            _, shard, node, entries = add
            now_node = now_nodes[shard]
            if now_node and node and now_node != node:
                again += entries
                moved[shard] = (node, now_node)
            else:
                kept.append(add)
        if again:
            self._adds = kept
            self._count -= len(again)
            for shard, (old, new) in sorted(moved.items()):
                logger.info(
                    "Shard %d is served by %s now, not %s (a failover or a moved slot): "
                    "the URLs this worker queued there in the last %.0f s are queued again "
                    "(an unreplicated write may have been lost; the seen set skips the others)",
                    shard, new, old, self.window,
                )  # fmt: skip
        return again

    def _expire(self, now: float) -> None:
        adds = self._adds
        while adds and (now - adds[0][0] > self.window or self._count > self.max_entries):
            self._count -= len(adds.popleft()[3])
