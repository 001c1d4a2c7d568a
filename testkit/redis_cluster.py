"""A real Redis Cluster for tests: 3 masters (Debian's redis-server), created
with ``redis-cli --cluster create``, on free loopback ports; with ``tls``,
clients and the cluster bus speak mutual TLS only."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from testkit.redis_server import RedisServer, find_redis_server
from testkit.redis_tls import TlsFiles

MASTERS = 3


class RedisCluster:
    def __init__(self, tls: TlsFiles | None = None) -> None:
        self.nodes: list[RedisServer] = []
        self.tls = tls
        # redis-cli options to reach a node (mutual TLS, or none).
        self.cli_args = tls.cli_args() if tls is not None else []

    @property
    def url(self) -> str:
        """The crawler's REDIS_URL for this cluster (any node will do)."""
        if self.tls is not None:
            return f"rediss+cluster://127.0.0.1:{self.nodes[0].port}/0?{self.tls.url_query()}"
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}/0"

    def start(self, timeout: float = 30.0) -> RedisCluster:
        tls_bus = ["--tls-cluster", "yes", "--tls-replication", "yes"] if self.tls else []
        for _ in range(MASTERS):
            node = RedisServer(
                extra_args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                            "--cluster-node-timeout", "2000", *tls_bus],
                tls=self.tls,
            )  # fmt: skip
            self.nodes.append(node.start())
        cli = str(Path(find_redis_server()).with_name("redis-cli"))
        if not Path(cli).exists():
            cli = shutil.which("redis-cli") or "redis-cli"
        subprocess.run(
            [cli, *self.cli_args, "--cluster", "create",
             *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=timeout,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not all(self._ok(cli, n.port, self.cli_args) for n in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        return self

    @staticmethod
    def _ok(cli: str, port: int, cli_args: list[str]) -> bool:
        out = subprocess.run(
            [cli, *cli_args, "-p", str(port), "cluster", "info"],
            capture_output=True, text=True, timeout=5,
        ).stdout  # fmt: skip
        return "cluster_state:ok" in out

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes.clear()
