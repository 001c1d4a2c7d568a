"""A real Redis Cluster of N masters on loopback, no replicas, for throughput
benchmarks (bench/frontier_ops.py ``--redis cluster --masters 1,2,3,4``).

``redis-cli --cluster create`` wants 3 masters at least, so the slots are
given here as it gives them: 16384 / N contiguous ranges, one per master
(``CLUSTER ADDSLOTSRANGE``), then every node meets the first. The nodes are
the tests' redis-servers (testkit/redis_server.py) on ports whose cluster
bus port is free too (testkit/redis_cluster.py ``cluster_port``). It offers
what benchlib's ``ClusterServer`` does (CPU summed over the masters, FLUSHALL
on each), and per master: its CPU, its commands processed.
"""

from __future__ import annotations

import time

import redis

from testkit.redis_cluster import cluster_port
from testkit.redis_server import RedisServer

SLOTS = 16384


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """Contiguous slot ranges, first and last slot, as even as can be."""
    bounds = [round(i * SLOTS / masters) for i in range(masters + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(masters)]


class MastersCluster:
    def __init__(self, masters: int, timeout: float = 30.0) -> None:
        if masters < 1:
            raise ValueError("a cluster needs one master at least")
        self.servers: list[RedisServer] = []
        try:
            for _ in range(masters):
                node = RedisServer(
                    extra_args=["--cluster-enabled", "yes", "--cluster-config-file",
                                "nodes.conf", "--cluster-node-timeout", "5000"],
                )  # fmt: skip
                node.port = cluster_port()
                self.servers.append(node.start())
            self.nodes = [redis.Redis(port=s.port) for s in self.servers]
            for node, (first, last) in zip(self.nodes, slot_ranges(masters), strict=True):
                node.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
            for node in self.nodes[1:]:
                node.execute_command("CLUSTER", "MEET", "127.0.0.1", self.servers[0].port)
            self._wait_ok(masters, timeout)
        except BaseException:
            self.stop()
            raise
        self.client = self.nodes[0]  # INFO server: every node runs the same redis-server

    def _wait_ok(self, masters: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            infos = [node.cluster("info") for node in self.nodes]
            known = [int(i["cluster_known_nodes"]) for i in infos]
            if all(i["cluster_state"] == "ok" for i in infos) and known == [masters] * masters:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"a cluster of {masters} masters did not form: {infos}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.servers[0].port}/0"

    def flushall(self) -> None:
        for node in self.nodes:
            node.flushall()

    def cpu_per_node(self) -> list[float]:
        return [
            float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
            for info in (node.info("cpu") for node in self.nodes)
        ]

    def cpu_seconds(self) -> float:
        return sum(self.cpu_per_node())

    def commands_per_node(self) -> list[int]:
        return [int(node.info("stats")["total_commands_processed"]) for node in self.nodes]

    def keys_per_node(self) -> list[int]:
        return [int(node.dbsize()) for node in self.nodes]

    def stop(self) -> None:
        for node in getattr(self, "nodes", []):
            node.close()
        for server in self.servers:
            server.stop()
