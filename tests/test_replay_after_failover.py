"""A lost enqueue is found again (issue 35 item 4), on a real Redis Cluster.

A page of one shard links to a URL of another shard, on another master. The
link's add is acknowledged by its master but never reaches the replica (the
replica is frozen with SIGSTOP, as Redis's own cluster tests freeze nodes, and
its replication link cut),
and the page's acknowledgement reaches its own master. That master is then
killed -9 and its replica takes over without the write: the link and its seen
mark are gone, and the page that linked to it is done. The worker that sent
the add sees another node serve the link's slot and adds it again.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster as RedisClusterClient
from redis.crc import key_slot
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.outbox import Outbox
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.frontier.store.replay import RecentAdds
from testkit.entries import entry
from testkit.redis_cluster import RedisCluster

SHARDS = 8


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    c = RedisCluster(replicas=1, node_timeout_ms=2000).start()
    try:
        yield c
    finally:
        c.stop()


def shard_master(cluster: RedisCluster, keys: CrawlKeys, shard: int) -> int:
    return cluster.master_of_slot(key_slot(keys.ready(shard).encode()))


async def test_a_link_lost_with_its_master_is_queued_again(cluster: RedisCluster) -> None:
    keys = CrawlKeys("replay", SHARDS)
    client = redis_client(cluster.url, outage_seconds=30)
    frontier = RedisFrontier(client, keys, 0, 1, 60_000)
    await frontier.prepare()
    outbox = Outbox(MemoryStatsCollector(get_crawler()), credit_mode=False)

    async def write() -> None:
        await outbox.write(frontier, lambda: None, lambda _: None, lambda _: None)  # type: ignore[arg-type, return-value]

    try:
        page = entry("http://page.test/")
        page_shard = keys.shard_of(page.pkey)
        # A link whose shard lives on another master than the page's.
        link = next(
            e
            for e in (entry(f"http://link{i}.test/") for i in range(1000))
            if shard_master(cluster, keys, keys.shard_of(e.pkey))
            != shard_master(cluster, keys, page_shard)
        )
        link_shard = keys.shard_of(link.pkey)
        await frontier.add([page])
        (lease, _), *_ = (await frontier.claim(page_shard, 1, "w")).items
        doomed = shard_master(cluster, keys, link_shard)
        replica = cluster.replica_of(doomed)
        cluster.wait_replicas_synced()
        # The replica is frozen and its link cut (a frozen process's kernel still takes
        # in what is sent to it): what the master acknowledges now is lost with it.
        replica_pid = cluster.node(replica).proc.pid  # type: ignore[union-attr]
        os.kill(replica_pid, signal.SIGSTOP)
        try:
            assert int(cluster.command(doomed, "client", "kill", "type", "replica")) == 1
            outbox.add(link)
            outbox.ack("done", lease)
            await write()
            assert (await frontier.counters())["queued"] == 1  # the link, on its master
            cluster.kill(doomed)
        finally:
            os.kill(replica_pid, signal.SIGCONT)
        assert cluster.command(replica, "cluster", "failover", "takeover").strip() == "OK"
        cluster.wait_promoted(replica)
        # The worker's other calls (its counters, claims, heartbeats) meet the dead
        # node and read the cluster's slots again: the link's slot has a new master.
        counters = await frontier.counters()
        assert counters["queued"] == 0, counters  # the write was lost with its master
        assert counters["done"] == 1  # and the page that linked to it is done
        await write()
        assert outbox.stats.get_value("frontier/replayed_urls") == 1
        assert (await frontier.counters())["queued"] == 1
        claimed = await frontier.claim(link_shard, 10, "w")
        assert [request for _, request in claimed.items] != []
        # Sent again once, not at every write: it is kept with its new master now.
        await write()
        assert outbox.stats.get_value("frontier/replayed_urls") == 1
    finally:
        await client.aclose()


async def test_only_urls_tested_against_the_seen_set_are_kept_and_the_window_ends() -> None:
    """Credits and votes would count twice, a dont_filter URL would be queued twice:
    only plain URLs are kept, and only for the window, at most max_entries of them."""
    now = [0.0]
    recent = RecentAdds(window=90, max_entries=3, clock=lambda: now[0])

    frontier = RedisFrontier(
        RedisClusterClient(host="127.0.0.1", port=1), CrawlKeys("r", 2), 0, 1, 60_000
    )  # never connected: the nodes it knows are none, so nothing ever "changed"
    recent.note(frontier, [entry("http://a.test/1")])
    recent.note(frontier, [entry("http://a.test/2", dont_filter=True)])
    recent.note(frontier, [entry("http://a.test/3", credit_only=True)])
    assert len(recent) == 1
    recent.note(frontier, [entry(f"http://b.test/{i}") for i in range(3)])
    assert len(recent) == 3  # the oldest add dropped past max_entries
    # A node the client does not know (never connected: '') is no change:
    # nothing is sent again and nothing leaves the window early.
    assert recent.changed(frontier) == []
    assert len(recent) == 3
    now[0] = 91
    recent.changed(frontier)  # past the window: every add expires, moved or not
    assert len(recent) == 0
    # On one Redis nothing is kept: its node never changes.
    single = RedisFrontier(Redis(port=1), CrawlKeys("r", 2), 0, 1, 60_000)
    recent.note(single, [entry("http://a.test/1")])
    assert len(recent) == 0
