"""A real Redis Cluster for tests: 3 masters (Debian's redis-server), created
with ``redis-cli --cluster create``, on free loopback ports."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from tests.support.redis_server import RedisServer, find_redis_server

MASTERS = 3


class RedisCluster:
    def __init__(self) -> None:
        self.nodes: list[RedisServer] = []

    @property
    def url(self) -> str:
        """The crawler's REDIS_URL for this cluster (any node will do)."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}/0"

    def start(self, timeout: float = 30.0) -> RedisCluster:
        for _ in range(MASTERS):
            node = RedisServer(
                extra_args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                            "--cluster-node-timeout", "2000"],
            )  # fmt: skip
            self.nodes.append(node.start())
        cli = str(Path(find_redis_server()).with_name("redis-cli"))
        if not Path(cli).exists():
            cli = shutil.which("redis-cli") or "redis-cli"
        subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=timeout,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not all(self._ok(cli, n.port) for n in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        return self

    @staticmethod
    def _ok(cli: str, port: int) -> bool:
        out = subprocess.run(
            [cli, "-p", str(port), "cluster", "info"], capture_output=True, text=True, timeout=5
        ).stdout
        return "cluster_state:ok" in out

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes.clear()
