"""A crawl on a real Redis Cluster whose masters fail (issue 35, item 4), and a
worker whose Redis stays away past CRAWL_REDIS_OUTAGE_SECONDS (item 3).

The cluster: 3 masters with a replica each, the settings docs/fleet.md asks
for (appendonly, cluster-require-full-coverage no, min-replicas-to-write 1),
a 2 s node timeout. The crawl: a few thousand pages, 3 workers, the project's
defaults (1 s per host, 30 s leases, CRAWL_FRONTIER_SHARDS 4). Judged by the
web server's own log: what was fetched, how often, how politely.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import redis

from crawlproject.frontier.keys import CrawlKeys
from crawlproject.frontier.urls import host_key
from testkit.crawlproc import REPO_ROOT, WorkerProcess, start_worker, tail, wait_all, wait_until
from testkit.redis_cluster import RedisCluster
from testkit.testweb import TestWeb, host_ip, page_counts, politeness_report

CRAWL = "failover"
SHARDS = 4  # CRAWL_FRONTIER_SHARDS' default
DELAY = 1.0  # CRAWL_HOST_DELAY's default
GOOD_CLUSTER = ["--cluster-require-full-coverage", "no", "--min-replicas-to-write", "1"]


def _slot(client: redis.Redis, key: str) -> int:
    return int(client.execute_command("CLUSTER", "KEYSLOT", key))


def _busiest_slot(cluster: RedisCluster, keys: CrawlKeys) -> int:
    """The slot of the crawl's hash tag holding the most keys."""
    tags = [*keys.shard_prefixes, keys.dedupe_prefix, keys.crawl_prefix]
    counts = {}
    for tag in tags:
        client = redis.Redis(port=_master_of_tag(cluster, tag))
        try:
            slot = _slot(client, tag)
            counts[slot] = int(client.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot))
        finally:
            client.close()
    return max(counts, key=lambda s: counts[s])


def _master_of_tag(cluster: RedisCluster, key: str) -> int:
    probe = redis.Redis(port=cluster.live_nodes()[0].port)
    try:
        return cluster.master_of_slot(_slot(probe, key))
    finally:
        probe.close()


def _no_traceback(procs: list[WorkerProcess]) -> None:
    for p in procs:
        text = p.log_path.read_text(errors="replace")
        assert "Traceback" not in text, tail(p.log_path, 80)
        assert "Frontier task failed" not in text, tail(p.log_path, 80)


def test_a_crawl_rides_through_a_failover_and_a_master_killed(
    testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    started = time.monotonic()
    cluster = RedisCluster(replicas=1, node_timeout_ms=2000, extra_args=GOOD_CLUSTER).start()
    try:
        web = testweb_factory(hosts=120, pages=25, latency_ms=(5, 30), links=4, cross_links=1)
        total = len(web.expected_urls)
        settings = {"LOG_LEVEL": "INFO"}
        procs = [
            start_worker(REPO_ROOT, cluster.url, CRAWL, web.seeds, settings, tmp_path / f"w{i}.log")
            for i in range(3)
        ]
        keys = CrawlKeys(CRAWL, SHARDS)

        # (b) A graceful CLUSTER FAILOVER of shard 0's master, a quarter in.
        wait_until(lambda: len(page_counts(web.log)) >= total // 4, timeout=90)
        b_master = _master_of_tag(cluster, keys.shard_prefixes[0])
        cluster.failover(cluster.replica_of(b_master))
        # Give the workers a moment past it; then every fetch so far is once.
        wait_until(lambda: len(page_counts(web.log)) >= total // 2, timeout=90)
        twice_before_kill = {u: n for u, n in page_counts(web.log).items() if n > 1}

        # (c) The master of the busiest slot killed -9; its replica promoted.
        slot = _busiest_slot(cluster, keys)
        victim = cluster.master_of_slot(slot)
        replica = cluster.replica_of(victim)
        served = {
            s for s in range(SHARDS) if _master_of_tag(cluster, keys.shard_prefixes[s]) == victim
        }
        cluster.kill(victim)
        promoted_in = cluster.wait_promoted(replica)
        # An operator (or systemd) restarts the dead node: it rejoins as the
        # replica, and min-replicas-to-write lets its new master write again.
        cluster.node(victim).start()
        cluster.wait_replicas_synced()

        codes = wait_all(procs, timeout=180, check=False)
        assert codes == [0, 0, 0], [tail(p.log_path, 60) for p in procs]
        _no_traceback(procs)
        logs = [p.log_path.read_text(errors="replace") for p in procs]
        # The cluster has what docs/fleet.md asks for: no start-up warning.
        assert not any("Redis Cluster:" in text for text in logs)
        # The kill was met (refused connections, CLUSTERDOWN or NOREPLICAS) and
        # ridden through by the workers, none restarted.
        assert any("Redis error in frontier" in t or "Redis answered" in t for t in logs)
        counts = page_counts(web.log)
        assert set(counts) == web.expected_urls, len(web.expected_urls - set(counts))
        # (b) lost nothing and fetched nothing twice.
        assert not twice_before_kill, twice_before_kill
        # (c) Duplicates only of what the killed master acknowledged and did not
        # replicate: pages of hosts of its shards, at most one per host
        # (docs/fleet.md).
        extra = Counter({u: n - 1 for u, n in counts.items() if n > 1})
        by_host: Counter[str] = Counter()
        for url, n in extra.items():
            by_host[host_key(url)] += n
        assert all(keys.shard_of(h) in served for h in by_host), (by_host, served)
        assert all(n <= 1 for n in by_host.values()), by_host
        # Politeness held. The killed master's lost host state (last fetch
        # time, slot in use) allows at most one early request per host of its
        # shards, which may overlap the fetch whose claim it lost; elsewhere
        # none (docs/fleet.md).
        shard_of_ip = {
            host_ip(i): keys.shard_of(host_key(web.base_url(i))) for i in range(1, web.hosts + 1)
        }
        report = politeness_report(web.log, DELAY)
        early = {ip: p.gaps_below_delay for ip, p in report.items() if p.gaps_below_delay}
        for ip, p in report.items():
            lost_state = shard_of_ip.get(ip) in served
            assert p.max_in_flight <= (2 if lost_state else 1), (ip, p)
            assert p.gaps_below_delay <= (1 if lost_state else 0), (ip, p)
        check = cluster.check()
        assert check.returncode == 0 and "[ERR]" not in check.stdout, check.stdout
        print(
            f"\nfailover test: {total} pages, {sum(extra.values())} fetched twice after the kill "
            f"({len(by_host)} hosts), {len(early)} host(s) with an early request, replica "
            f"promoted {promoted_in:.1f} s after the kill, "
            f"{time.monotonic() - started:.0f} s in all",
            file=sys.stderr,
        )
    finally:
        cluster.stop()
