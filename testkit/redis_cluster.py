"""A real Redis Cluster for tests: 3 masters (Debian's redis-server), created
with ``redis-cli --cluster create``, on free loopback ports; with ``tls``,
clients and the cluster bus speak mutual TLS only; with ``replicas=1``, each
master has a replica, and a master can be failed over (``CLUSTER FAILOVER``)
or killed -9 while a crawl runs."""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from testkit.redis_server import RedisServer, find_redis_server
from testkit.redis_tls import TlsFiles

MASTERS = 3
BUS_OFFSET = 10000  # a node's cluster bus listens on its port + 10000
MAX_PORT = 65535 - BUS_OFFSET


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port() -> int:
    """A free port whose bus port (+10000) is free too: at most 55535."""
    for _ in range(200):
        port = random.randint(20000, MAX_PORT)
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def _port_of(nodes_line: str) -> int:
    """The client port of a ``CLUSTER NODES`` line (0 if none)."""
    fields = nodes_line.split()
    if len(fields) < 2:
        return 0
    port = fields[1].split("@")[0].rsplit(":", 1)[-1]
    return int(port) if port.isdigit() else 0


class SlotOwners:
    """Slot ranges and the port of the master serving each."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int, int]] = []

    def get(self, slot: int) -> int | None:
        return next((port for lo, hi, port in self.ranges if lo <= slot <= hi), None)


def redis_cli() -> str:
    cli = str(Path(find_redis_server()).with_name("redis-cli"))
    if not Path(cli).exists():
        cli = shutil.which("redis-cli") or "redis-cli"
    return cli


class RedisCluster:
    def __init__(
        self,
        tls: TlsFiles | None = None,
        replicas: int = 0,
        node_timeout_ms: int = 2000,
        extra_args: list[str] | None = None,
    ) -> None:
        self.nodes: list[RedisServer] = []
        self.tls = tls
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.extra_args = list(extra_args or [])
        # redis-cli options to reach a node (mutual TLS, or none).
        self.cli_args = tls.cli_args() if tls is not None else []
        self.cli = redis_cli()

    @property
    def url(self) -> str:
        """The crawler's REDIS_URL for this cluster (any node will do)."""
        if self.tls is not None:
            return f"rediss+cluster://127.0.0.1:{self.nodes[0].port}/0?{self.tls.url_query()}"
        return f"redis+cluster://127.0.0.1:{self.live_nodes()[0].port}/0"

    def start(self, timeout: float = 30.0) -> RedisCluster:
        for _ in range(MASTERS * (1 + self.replicas)):
            self.nodes.append(self._new_node())
        subprocess.run(
            [self.cli, *self.cli_args, "--cluster", "create",
             *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            check=True, capture_output=True, timeout=timeout,
        )  # fmt: skip
        self.wait_ok(timeout)
        if self.replicas:
            self.wait_replicas_synced(timeout)
        return self

    def _new_node(self, *more_args: str) -> RedisServer:
        tls_bus = ["--tls-cluster", "yes", "--tls-replication", "yes"] if self.tls else []
        node = RedisServer(
            appendonly=self.replicas > 0,
            extra_args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", str(self.node_timeout_ms), *tls_bus,
                        *self.extra_args, *more_args],
            tls=self.tls,
        )  # fmt: skip
        node.port = cluster_port()
        return node.start()

    def add_master(self, timeout: float = 30.0) -> tuple[int, int | None]:
        """A new empty master joins (``redis-cli --cluster add-node``), and with
        ``replicas``, a replica of it (``--cluster-slave --cluster-master-id``);
        returns when every node knows both and the replica is in sync: the
        master's port and its replica's (None without replicas). It serves no
        slot until one is moved to it (slot_migration.py)."""
        # add-node writes the cluster's functions to the new master, which
        # min-replicas-to-write would refuse before its replica joins: the
        # cluster's value is set on it once the replica is in sync.
        wanted = self.command(self.live_nodes()[0].port, "config", "get", "min-replicas-to-write")
        master = self._new_node("--min-replicas-to-write", "0")
        self.nodes.append(master)
        self._add_node(master.port, [], timeout)
        master_id = self.command(master.port, "cluster", "myid").strip()
        # redis-cli finds the master named by --cluster-master-id in the
        # existing node's view: wait until every node knows it.
        self.wait_agreed(timeout)
        replica: RedisServer | None = None
        if self.replicas:
            replica = self._new_node()
            self.nodes.append(replica)
            self._add_node(
                replica.port, ["--cluster-slave", "--cluster-master-id", master_id], timeout
            )
        self.wait_agreed(timeout)
        if replica is not None:
            deadline = time.monotonic() + timeout
            while not self._replica_online(master.port):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the replica of new master {master.port} did not sync")
                time.sleep(0.1)
        value = wanted.split()[-1] if wanted.split() else "0"
        self.command(master.port, "config", "set", "min-replicas-to-write", value)
        return master.port, None if replica is None else replica.port

    def _add_node(self, port: int, extra: list[str], timeout: float) -> None:
        existing = next(n for n in self.live_nodes() if n.port != port)
        done = subprocess.run(
            [self.cli, *self.cli_args, "--cluster", "add-node", f"127.0.0.1:{port}",
             f"127.0.0.1:{existing.port}", *extra],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster add-node failed:\n{done.stdout}{done.stderr}")

    def _replica_online(self, master_port: int) -> bool:
        info = self.command(master_port, "info", "replication")
        return f"connected_slaves:{self.replicas}" in info and "state=online" in info

    def wait_agreed(self, timeout: float = 30.0) -> None:
        """Until every live node knows every live node (no handshake left)
        and the cluster is ok, as redis-cli's ``wait_cluster_join``."""
        deadline = time.monotonic() + timeout
        ports = {n.port for n in self.live_nodes()}
        while True:
            views = [self.command(p, "cluster", "nodes") for p in ports]
            if all(
                {_port_of(line) for line in v.splitlines() if "handshake" not in line} >= ports
                for v in views
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster's nodes did not agree on its members")
            time.sleep(0.1)
        self.wait_ok(timeout)

    def command(self, port: int, *args: str, timeout: float = 5.0) -> str:
        """A redis-cli command on one node; its text answer."""
        return subprocess.run(
            [self.cli, *self.cli_args, "-p", str(port), *args],
            capture_output=True, text=True, timeout=timeout,
        ).stdout  # fmt: skip

    def live_nodes(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def wait_ok(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not all("cluster_state:ok" in self.command(n.port, "cluster", "info")
                      for n in self.live_nodes()):  # fmt: skip
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)

    def wait_replicas_synced(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            masters = self.masters()
            infos = [self.command(p, "info", "replication") for p in masters.values()]
            # At least the 3 created (add_master and a slot moved make 4).
            if len(masters) >= MASTERS and all(
                f"connected_slaves:{self.replicas}" in i and "state=online" in i for i in infos
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the replicas did not come online")
            time.sleep(0.1)

    def masters(self) -> dict[str, int]:
        """Serving masters (with slots): node id -> port, as a live node sees them."""
        out = self.command(self.live_nodes()[0].port, "cluster", "nodes")
        masters = {}
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 9 and "master" in f[2] and "fail" not in f[2]:
                masters[f[0]] = int(f[1].split("@")[0].rsplit(":", 1)[1])
        return masters

    def replica_of(self, master_port: int) -> int:
        """The port of ``master_port``'s replica."""
        info = self.command(master_port, "info", "replication")
        for line in info.splitlines():
            if line.startswith("slave0:"):
                fields = dict(kv.split("=", 1) for kv in line.split(":", 1)[1].split(","))
                return int(fields["port"])
        raise RuntimeError(f"master {master_port} has no replica:\n{info}")

    def master_of_slot(self, slot: int) -> int:
        port = self.slot_ranges().get(slot)
        if port is None:
            raise RuntimeError(f"no master serves slot {slot}")
        return port

    def slot_ranges(self) -> SlotOwners:
        """Who serves each slot, as a live node sees it (one ``CLUSTER NODES``)."""
        owners = SlotOwners()
        for line in self.command(self.live_nodes()[0].port, "cluster", "nodes").splitlines():
            f = line.split()
            if len(f) < 9 or "master" not in f[2] or "fail" in f[2]:
                continue
            for part in f[8:]:
                lo, _, hi = part.partition("-")
                if lo.isdigit():  # not an open slot ([s->-id] / [s-<-id])
                    owners.ranges.append((int(lo), int(hi or lo), _port_of(line)))
        return owners

    def node(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == port)

    def failover(self, replica_port: int, timeout: float = 30.0) -> None:
        """A graceful ``CLUSTER FAILOVER`` on ``replica_port``: it waits for the
        replica to catch up, so no acknowledged write is lost."""
        assert self.command(replica_port, "cluster", "failover").strip() == "OK"
        deadline = time.monotonic() + timeout
        while "role:master" not in self.command(replica_port, "info", "replication"):
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not take over")
            time.sleep(0.05)
        self.wait_ok(timeout)

    def kill(self, port: int) -> None:
        """SIGKILL one node (its unreplicated writes are lost)."""
        node = self.node(port)
        assert node.proc is not None
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(10)

    def wait_promoted(self, replica_port: int, timeout: float = 30.0) -> float:
        """Seconds until ``replica_port`` is a master and the cluster is ok."""
        started = time.monotonic()
        while "role:master" not in self.command(replica_port, "info", "replication"):
            if time.monotonic() - started > timeout:
                raise RuntimeError("the replica was not promoted")
            time.sleep(0.05)
        self.wait_ok(timeout)
        return time.monotonic() - started

    def check(self) -> subprocess.CompletedProcess[str]:
        """``redis-cli --cluster check`` from a live node."""
        return subprocess.run(
            [self.cli, *self.cli_args, "--cluster", "check",
             f"127.0.0.1:{self.live_nodes()[0].port}"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes.clear()
