"""The crawl on a real Redis Cluster (3 masters): the 3-worker crawl of
tests/test_crawl_fleet.py, unchanged, with REDIS_URL=redis+cluster://..."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from testkit.crawlproc import crawl_status
from testkit.named_web import named_webs
from testkit.redis_cluster import RedisCluster
from testkit.testweb import TestWeb
from tests import test_address_politeness, test_crawl_fleet, test_recrawl


@pytest.fixture
def cluster() -> Iterator[RedisCluster]:
    nodes = RedisCluster().start()
    try:
        yield nodes
    finally:
        nodes.stop()


def test_the_fleet_crawl_runs_on_a_redis_cluster(
    cluster: RedisCluster, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    test_crawl_fleet.test_three_workers_fetch_every_page_once_politely(
        cluster.url, testweb_factory, tmp_path
    )
    # The crawl's keys are spread over the masters (4 frontier shards, the
    # dedupe index and the crawl's own keys: one hash tag each).
    sizes = []
    for node in cluster.nodes:
        client = redis.Redis(port=node.port)
        try:
            sizes.append(int(client.dbsize()))
        finally:
            client.close()
    assert sum(1 for n in sizes if n > 0) >= 2, sizes


def test_recrawl_and_status_run_on_a_redis_cluster(
    cluster: RedisCluster, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # Tracked fetches, `crawlproject recrawl --all/--once/--status` and two
    # recrawl cycles of conditional requests, unchanged, on the cluster.
    test_recrawl.test_recrawl_revalidates_unchanged_pages_and_refetches_changed_ones(
        cluster, testweb_factory, tmp_path
    )
    # `crawlproject status` reads the fleet's counters from the cluster: three
    # crawls of the same 8 pages, each page once a crawl, robots.txt once a host
    # (kept in the cluster between crawls).
    status = crawl_status(cluster.url, "fresh")
    assert status["recrawl"]["tracked"] == 8
    assert status["fleet"]["pages"] == 3 * 8 + 2
    assert status["frontier"]["done"] == 3 * 8
    assert status["frontier"]["queued"] == 0 and status["frontier"]["leased"] == 0


def test_the_address_cap_holds_on_a_redis_cluster(cluster: RedisCluster, tmp_path: Path) -> None:
    # 20 names on one address, 3 workers: places at the address (its home
    # shard's slot) and host slots (theirs), every script in one slot.
    with named_webs() as make_web:
        test_address_politeness.test_twenty_names_of_one_address_share_its_places(
            cluster.url, make_web, tmp_path
        )
