"""The duplicate index's script(s), called through the project's own client
(crawlproject/dedupe/) while the slots of the index's keys are held
half-migrated on a real Redis Cluster: their keys all on the source, all on the
target, or split (testkit/slot_migration.py). No error, nothing half-applied,
and the right verdicts once the moves complete (a page stored once, a near copy
never stored). The frontier's scripts: tests/test_slot_migration_scripts.py.
"""

from __future__ import annotations

import hashlib
import uuid

import pytest
import redis
from redis.asyncio import Redis

from crawlproject.dedupe.index import DedupeIndex, DedupeKind
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.redis_cluster import RedisCluster
from testkit.slot_migration import LAYOUTS, run_held
from tests.test_slot_migration_scripts import client, cluster

__all__ = ["client", "cluster"]  # the fixtures, shared

pytestmark = pytest.mark.parametrize("layout", LAYOUTS)


def dedupe_slots(cluster: RedisCluster, keys: CrawlKeys) -> set[int]:
    """The slots holding the crawl's duplicate-index keys."""
    others = {keys.crawl_prefix + "*", *(p + "*" for p in keys.shard_prefixes), keys.start_urls}
    patterns = [p for p in keys.all_patterns() if p not in others]
    slots: set[int] = set()
    for port in cluster.masters().values():
        node = redis.Redis(port=port)
        try:
            for pattern in patterns:
                slots |= {int(node.cluster("KEYSLOT", k)) for k in node.scan_iter(match=pattern)}
        finally:
            node.close()
    return slots


async def test_dedupe(cluster: RedisCluster, client: Redis, layout: str) -> None:
    keys = CrawlKeys(f"mig-{uuid.uuid4().hex[:8]}", 1)
    index = DedupeIndex(client, keys, k=3)

    def page(body: bytes, simhash: int, n: int) -> tuple[bytes, int, str, str]:
        return hashlib.sha1(body).digest(), simhash, f"http://d{n}.test/", f"d{n}.test"

    a, b, c = 0x0123456789ABCDEF, 0xFEDCBA9876543210, 0x0F0F0F0F0F0F0F0F
    stored = [page(b"a", a, 1), page(b"b", b, 2)]
    assert [v.kind for v in await index.check_and_add_many(stored)] == [DedupeKind.NEW] * 2
    pages = [page(b"a", a, 3), page(b"b'", b ^ 0b101, 4), page(b"c", c, 5)]
    held = await run_held(
        cluster, dedupe_slots(cluster, keys), layout, lambda: index.check_and_add_many(pages)
    )
    assert [v.kind for v in held.result] == [DedupeKind.EXACT, DedupeKind.NEAR, DedupeKind.NEW]
    assert [v.original for v in held.result[:2]] == ["http://d1.test/", "http://d2.test/"]
    again = await index.check_and_add_many([page(b"c", c, 6), page(b"b'", b ^ 0b101, 7)])
    assert [(v.kind, v.original) for v in again] == [
        (DedupeKind.EXACT, "http://d5.test/"),  # stored once, by the held call
        (DedupeKind.NEAR, "http://d2.test/"),  # a near copy is not stored
    ]
