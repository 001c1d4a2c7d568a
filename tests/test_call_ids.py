"""Calls sent again answer their first run's reply (issue 35 item 3): every
script that writes runs once per call id (crawlproject/lua.py once_per_call).

Replies are lost through testkit/tcp_proxy.py (``drop_next_reply``) in front
of a real redis-server: a one-node Redis Cluster, whose client (redis-py's,
its retry kept: redis_client.py) sends a call again by itself; and a plain one,
where the worker's outbox sends a failed batch again under its call id.
Helpers and the plain fixtures are tests/test_lost_reply.py's.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis
from redis.exceptions import RedisError
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from crawlproject.frontier.admission.token_evidence import TokenEvidence
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.outbox import Outbox
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.lua import CALL_IDS
from crawlproject.robots.store import RobotsStore
from crawlproject.status.fleet_counters import FleetCounters
from testkit.redis_cluster import cluster_port
from testkit.redis_server import RedisServer
from testkit.tcp_proxy import TcpProxy
from tests.test_lost_reply import (  # noqa: F401  (fixtures: direct, pair, proxy)
    URLS,
    Pair,
    claim_every_shard,
    direct,
    entry,
    lost,
    pair,
    proxy,
    same_state,
)


@pytest.fixture
def one_node_cluster() -> Iterator[tuple[RedisServer, TcpProxy]]:
    """A Redis Cluster of one master (every slot) that announces the port of
    a proxy in front of it: the cluster client reaches it only through the
    proxy."""
    node = RedisServer(
        extra_args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
    )
    node.port = cluster_port()
    node.start()
    try:
        with TcpProxy("127.0.0.1", node.port) as p:
            admin = SyncRedis(port=node.port)
            admin.config_set("cluster-announce-port", p.port)
            admin.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            while admin.cluster("info")["cluster_state"] != "ok":
                time.sleep(0.02)
            admin.close()
            yield node, p
    finally:
        node.stop()


async def test_a_script_sent_again_by_the_cluster_client_runs_once(
    one_node_cluster: tuple[RedisServer, TcpProxy],
) -> None:
    """redis-py's cluster client sends a command again (after reading the
    cluster's slots again) on a connection error: its ``retry`` (formerly
    ``cluster_error_retry_attempts``, 10 in redis-py 8.1), kept (redis_client.py),
    so a plain command whose reply was lost (INCR) still runs twice there: the
    project sends no such write (redis_calls.py's docstring; counters: the test
    below). A script runs once per call id (lua.py once_per_call): its resend answers the
    first run's reply. An add of a request that skips the seen set
    (dont_filter) queues it once; a claim leases once (no lease nobody
    fetches); robots' get_or_lock sent again by the owner of the lock it took
    answers "locked by you" (a second run answered "not locked")."""
    node, front = one_node_cluster
    client = redis_client(f"redis+cluster://127.0.0.1:{front.port}", outage_seconds=30)
    f = RedisFrontier(client, CrawlKeys("c", 2), 0, 1, 60_000)
    await f.prepare()
    assert await claim_every_shard(f) == []  # loads the scripts: a lost reply is a run's
    assert (await f.add([entry("http://x.test/0")])).added == 1
    robots = RobotsStore(client, f.keys, 60_000)
    assert await robots.get_or_lock(0, "http://x.test", 1, "w0", 60_000) == (None, True)

    async def resent(call: Callable[[], Awaitable[Any]]) -> Any:
        before = front.dropped
        front.drop_next_reply(b"EVALSHA")
        reply = await call()  # the cluster client sent it again: no error
        assert front.dropped == before + 1
        return reply

    again = entry("http://a.test/1", dont_filter=True)
    result = await resent(lambda: f.add([again]))
    assert (result.added, result.seen_hits) == (1, 0)
    shard = f.keys.shard_of(again.pkey)
    assert await f.redis.llen(f.keys.queue(shard, again.pkey)) == 1
    batch = await resent(lambda: f.claim(shard, 10, "w1"))
    assert len(batch.items) == 1
    counters = await f.counters()
    assert (counters["leased"], counters["queued"]) == (1, 1)  # x.test/0's
    locked = await resent(lambda: robots.get_or_lock(1, "http://a.test", 1, "w1", 60_000))
    assert locked == (None, True)
    admin = SyncRedis(port=node.port)
    assert admin.get(f.keys.robots_lock(1, "http://a.test")) == b"w1"
    admin.close()
    await client.aclose()


async def test_counters_sent_again_by_the_cluster_client_count_once(
    one_node_cluster: tuple[RedisServer, TcpProxy],
) -> None:
    """The cluster client sends a write again after its reply was lost: a
    plain HINCRBY (the token guard's evidence and the fleet's counters were
    pipelines of them) then counted twice. Both go through increments.py,
    a script run once per call id: counted once. The lost request is told by
    its key, which a pipeline of HINCRBYs names too."""
    node, front = one_node_cluster
    client = redis_client(f"redis+cluster://127.0.0.1:{front.port}", outage_seconds=30)
    keys = CrawlKeys("c", 2)
    admin = SyncRedis(port=node.port)
    evidence, shape = TokenEvidence(client, keys), b"\x01" * 8
    await evidence.record("a.test", shape, True, 0)  # loads the script: a lost reply is a run's
    front.drop_next_reply(b"pp:a.test")
    await evidence.record("a.test", shape, False, 3)  # sent again by the client: no error
    assert front.dropped == 1
    counts = {b"u" + shape: b"1", b"d" + shape: b"1", b"s" + shape: b"3"}
    assert admin.hgetall(evidence.key("a.test")) == counts
    fleet = FleetCounters(client, keys, "pages")
    await fleet.report({"pages": 2}, 10)
    front.drop_next_reply(keys.fleet_stats.encode())
    await fleet.report({"pages": 5, "other": 1}, 20)
    assert front.dropped == 2
    assert admin.hgetall(keys.fleet_stats) == {b"pages": b"5", b"other": b"1"}
    assert admin.hgetall(keys.throughput) == {b"10": b"2", b"20": b"3"}
    admin.close()
    await client.aclose()


def next_call_id() -> str:
    """The id CALL_IDS gives next (lua.py CallIds: a fixed 10-digit process
    part and a counter, hex)."""
    probe = CALL_IDS.new()
    return probe[:10] + format(int(probe[10:], 16) + 1, "x")


async def test_an_outbox_batch_sent_again_queues_and_counts_once(
    pair: Pair,  # noqa: F811  (the fixtures of tests/test_lost_reply.py)
    proxy: TcpProxy,  # noqa: F811
    direct: Redis,  # noqa: F811
) -> None:
    """The outbox's writes of URLs over two shards: the first's reply lost
    (every shard's call ran), the second's call on one shard refused before it
    ran (its reply key of the wrong type) while the other shard's ran. Each
    failed batch is sent again as it was, under its call ids: the calls that
    ran answer their first replies, so queues (a dont_filter request that
    skips the seen set included), the seen set and every counter (seen_hits
    too) are those of one run; the Scrapy stats count each URL once."""
    once, twice = pair
    outbox = Outbox(MemoryStatsCollector(get_crawler()), credit_mode=False)
    first = [entry(u) for u in URLS] + [entry(URLS[0], dont_filter=True)]
    second = [entry("http://a.test/3"), entry("http://c.test/3"), entry(URLS[1], dont_filter=True)]
    assert len({once.keys.shard_of(e.pkey) for e in second}) == 2
    added: list[int] = []

    async def write() -> None:
        await outbox.write(twice, lambda: None, added.extend, lambda _: None)  # type: ignore[arg-type, return-value]

    results = [await once.add(batch) for batch in (first, second)]
    for e in first:
        outbox.add(e)
    await lost(proxy, write)
    await write()  # sent again: answered by the first run
    for e in second:
        outbox.add(e)
    call = next_call_id()
    refused = twice.keys.shard_prefixes[twice.keys.shard_of(second[1].pkey)] + f"c:{call}.1"
    await direct.rpush(refused, "not a reply")
    with pytest.raises(RedisError, match="WRONGTYPE"):
        await write()
    assert outbox.pending_entries == len(second)
    await direct.delete(refused)
    await write()
    assert not outbox
    a, b = await same_state(direct)
    assert a == b
    assert outbox.stats.get_value("frontier/enqueued") == sum(r.added for r in results) == 8
    assert outbox.stats.get_value("frontier/seen_hits", 0) == sum(r.seen_hits for r in results)
    assert await claim_every_shard(once) == await claim_every_shard(twice)
