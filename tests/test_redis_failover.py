"""A crawl on a real Redis Cluster that changes under it (issue 35, "What must
be shown"): slots moved live to a new master, a graceful failover, then a
master killed -9.

The cluster: 3 masters with a replica each, the settings docs/fleet.md asks
for (appendonly, cluster-require-full-coverage no, min-replicas-to-write 1),
a 2 s node timeout. The crawl: a few thousand pages, 3 workers, the project's
defaults (1 s per host, 30 s leases, CRAWL_FRONTIER_SHARDS not set). Judged by
the web server's own log: what was fetched, how often, how politely.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import redis
from redis.crc import key_slot

from crawlproject.frontier.basics.urls import host_key
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import REPO_ROOT, WorkerProcess, start_worker, tail, wait_all, wait_until
from testkit.redis_cluster import RedisCluster
from testkit.slot_migration import busiest_slots, move_slot
from testkit.testweb import TestWeb, host_ip, page_counts, politeness_report

CRAWL = "failover"
DELAY = 1.0  # CRAWL_HOST_DELAY's default
MOVED_SLOTS = 4  # to the new master in (a), busiest first
GOOD_CLUSTER = ["--cluster-require-full-coverage", "no", "--min-replicas-to-write", "1"]


def _slot(client: redis.Redis, key: str) -> int:
    return int(client.execute_command("CLUSTER", "KEYSLOT", key))


def _crawl_keys(cluster: RedisCluster) -> CrawlKeys:
    """The crawl's keys, with the shard count its first worker recorded
    (``meta``): whatever CRAWL_FRONTIER_SHARDS' default is."""
    client = redis.RedisCluster(host="127.0.0.1", port=cluster.live_nodes()[0].port)
    try:
        meta = CrawlKeys(CRAWL, 1).meta
        deadline = time.monotonic() + 60
        while (shards := client.hget(meta, "shards")) is None:
            assert time.monotonic() < deadline, "no worker recorded the crawl's layout"
            time.sleep(0.1)
        return CrawlKeys(CRAWL, int(shards))
    finally:
        client.close()


def _crawl_slots(cluster: RedisCluster, keys: CrawlKeys) -> set[int]:
    """Every slot holding a key of the crawl (its shards, its duplicate index,
    its own keys), found by SCAN on each master."""
    slots: set[int] = set()
    for port in cluster.masters().values():
        client = redis.Redis(port=port)
        try:
            for pattern in keys.all_patterns():
                slots |= {key_slot(k) for k in client.scan_iter(match=pattern, count=1000)}
        finally:
            client.close()
    return slots


def _master_of_tag(cluster: RedisCluster, key: str) -> int:
    probe = redis.Redis(port=cluster.live_nodes()[0].port)
    try:
        return cluster.master_of_slot(_slot(probe, key))
    finally:
        probe.close()


def _problems(procs: list[WorkerProcess]) -> list[str]:
    """The workers' error lines and the last line of each traceback."""
    out = []
    for p in procs:
        lines = p.log_path.read_text(errors="replace").splitlines()
        out += [line[:300] for line in lines if " ERROR: " in line or " CRITICAL: " in line]
        out += [line for line in lines if line[:1].isalpha() and "Error: " in line[:60]]
    return out[:40]


def _no_traceback(procs: list[WorkerProcess]) -> None:
    for p in procs:
        text = p.log_path.read_text(errors="replace")
        assert "Traceback" not in text, tail(p.log_path, 80)
        assert "Frontier task failed" not in text, tail(p.log_path, 80)


def test_a_crawl_rides_through_a_reshard_a_failover_and_a_master_killed(
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
        keys = _crawl_keys(cluster)

        def fetched() -> int:
            return len(page_counts(web.log))

        def wait_pages(n: int) -> None:
            """Until ``n`` pages are fetched; a crawl that ends short (pages
            lost) or stalls fails with what the workers logged."""
            wait_until(lambda: fetched() >= n or all(p.poll() is not None for p in procs), 90)
            assert fetched() >= n, (
                f"{fetched()} of {total} pages fetched, the workers ended "
                f"{[p.returncode for p in procs]}: {_problems(procs)}"
            )

        # (a) A 4th master and its replica join; the crawl's 4 busiest slots
        # move to it live, 50 keys a MIGRATE, while the workers go on.
        wait_pages(total // 12)
        new_master, new_replica = cluster.add_master()
        assert new_replica is not None
        crawl_slots = _crawl_slots(cluster, keys)
        moving = busiest_slots(cluster, crawl_slots, MOVED_SLOTS)
        reshard_started = time.monotonic()
        moved_keys = sum(move_slot(cluster, s, new_master, batch=50, pause=0.01) for s in moving)
        reshard_s = time.monotonic() - reshard_started
        assert all(cluster.master_of_slot(s) == new_master for s in moving)
        at_reshard_end = fetched()
        assert at_reshard_end < total, "the crawl ended before the slots moved"

        # (b) A graceful CLUSTER FAILOVER of the new master's replica: the
        # slots just moved change master again.
        wait_pages(at_reshard_end + total // 20)
        cluster.failover(new_replica)
        # Give the workers a moment past it; then every fetch so far is once.
        at_failover = fetched()
        wait_pages(at_failover + total // 20)
        twice_before_kill = {u: n for u, n in page_counts(web.log).items() if n > 1}

        # (c) The master of the busiest slot killed -9; its replica promoted.
        (slot,) = busiest_slots(cluster, _crawl_slots(cluster, keys), 1)
        victim = cluster.master_of_slot(slot)
        replica = cluster.replica_of(victim)
        served = {s for s in range(keys.shards) if _master_of_tag(cluster, keys.ready(s)) == victim}
        at_kill = fetched()
        assert at_kill < total, "the crawl ended before the master was killed"
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
        # The moves and the kill were met (TRYAGAIN, refused connections,
        # CLUSTERDOWN or NOREPLICAS) and ridden through, no worker restarted.
        assert any("Redis error in frontier" in t or "Redis answered" in t for t in logs)
        counts = page_counts(web.log)
        assert set(counts) == web.expected_urls, len(web.expected_urls - set(counts))
        # (a) and (b) lost nothing and fetched nothing twice.
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
        # Politeness held. The killed master's lost host or address state (last
        # fetch time, slot or place in use) allows at most one early request
        # per host of its shards, which may overlap the fetch whose claim it
        # lost; elsewhere none (docs/fleet.md).
        lost_state = {
            host_ip(i)
            for i in range(1, web.hosts + 1)
            if keys.shard_of(host_key(web.base_url(i))) in served
            or keys.address_shard(host_ip(i)) in served
        }
        report = politeness_report(web.log, DELAY)
        early = {ip: p.gaps_below_delay for ip, p in report.items() if p.gaps_below_delay}
        for ip, p in report.items():
            lost = ip in lost_state
            assert p.max_in_flight <= (2 if lost else 1), (ip, p)
            assert p.gaps_below_delay <= (1 if lost else 0), (ip, p)
        check = cluster.check()
        assert check.returncode == 0 and "[ERR]" not in check.stdout, check.stdout
        print(
            f"\nreshard/failover test: {total} pages, {keys.shards} shards; (a) {len(moving)} of "
            f"{len(crawl_slots)} slots ({moved_keys} keys) moved in {reshard_s:.1f} s; (a) done "
            f"at {at_reshard_end} pages, (b) at {at_failover}, (c) at {at_kill}; "
            f"{sum(extra.values())} fetched twice after the kill ({len(by_host)} hosts), "
            f"{len(early)} host(s) with an early request, replica promoted "
            f"{promoted_in:.1f} s after the kill, {time.monotonic() - started:.0f} s in all",
            file=sys.stderr,
        )
    finally:
        cluster.stop()
