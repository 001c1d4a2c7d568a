"""``crawlproject reset`` on a real Redis Cluster (3 masters): a crawl's keys
sit on several masters (a hash tag per shard, the duplicate index, the
crawl's own keys); every one of them goes, on every master, and the crawl
starts over."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from testkit.redis_cluster import RedisCluster
from testkit.testweb import TestWeb, page_counts
from tests.test_start_over import reset, run


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    nodes = RedisCluster().start()
    try:
        yield nodes
    finally:
        nodes.stop()


def keys_per_master(cluster: RedisCluster, crawl: str) -> list[int]:
    counts = []
    for node in cluster.nodes:
        client = redis.Redis(port=node.port)
        try:
            if client.info("replication")["role"] != "master":
                continue
            found = {*client.scan_iter(f"cp:{{{crawl}}}:*"), *client.scan_iter(f"cp:{{{crawl}/*")}
            counts.append(len(found | set(client.keys(f"{crawl}:start_urls"))))
        finally:
            client.close()
    return counts


def test_reset_deletes_a_crawl_on_every_master(
    cluster: RedisCluster, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=3, pages=3, links=1, cross_links=0, query_variants=0)
    seeds = [web.base_url(i) for i in (1, 2, 3)]
    run(cluster.url, "spread", seeds, tmp_path, "first")
    before = keys_per_master(cluster, "spread")
    assert sum(1 for n in before if n) >= 2, before  # spread over the masters

    done = reset(cluster.url, "--crawl", "spread", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("crawl 'spread' reset: deleted ")
    assert keys_per_master(cluster, "spread") == [0] * len(before)

    run(cluster.url, "spread", seeds, tmp_path, "again")
    assert page_counts(web.log) == dict.fromkeys(web.expected_urls, 2)  # started over
