"""At a worker's start on a Redis Cluster: what its cluster lacks for a crawl
that survives a master's death (docs/fleet.md, "What a crawl needs of its
cluster"), one warning line each.

* a replica per master: else a failed master's slots (a frontier shard, the
  duplicate index, the crawl's own keys) are gone until it comes back;
* ``appendonly yes``: else a restarted node comes back empty;
* ``cluster-require-full-coverage no``: else one failed master stops every
  other one until its replica is promoted;
* ``min-replicas-to-write`` >= 1: else a master cut off from its replica goes
  on acknowledging writes its replica never gets.

Read with ``CLUSTER NODES`` (any node) and ``CONFIG GET`` on each master; a
cluster whose ``CONFIG`` is renamed or forbidden is said once, and the start
goes on.
"""

from __future__ import annotations

import logging
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

logger = logging.getLogger(__name__)

WANTED = (
    ("appendonly", "yes", "appendonly yes (a restarted node would come back empty)"),
    (
        "cluster-require-full-coverage",
        "no",
        "cluster-require-full-coverage no (one failed master stops every other "
        "one until its replica is promoted)",
    ),
)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def masters_without_replica(nodes_text: str) -> list[str]:
    """The serving masters (``host:port``) of ``CLUSTER NODES`` output that
    no connected replica follows."""
    masters: dict[str, str] = {}
    followed: set[str] = set()
    for line in nodes_text.splitlines():
        f = line.split()
        if len(f) < 8:
            continue
        flags = f[2].split(",")
        if "fail" in flags or "fail?" in flags:
            continue
        if "master" in flags and len(f) > 8:
            masters[f[0]] = f[1].split("@")[0]
        elif "slave" in flags and f[7] == "connected":
            followed.add(f[3])
    return sorted(addr for node_id, addr in masters.items() if node_id not in followed)


def config_gaps(config: dict[str, str]) -> list[str]:
    """What one master's ``CONFIG GET`` answers lack, as warning phrases."""
    gaps = [why for name, want, why in WANTED if config.get(name, want) != want]
    try:
        min_replicas = int(config.get("min-replicas-to-write", "1"))
    except ValueError:
        min_replicas = 0
    if min_replicas < 1:
        gaps.append(
            "min-replicas-to-write >= 1 (a master cut off from its replica goes on "
            "acknowledging writes it will lose)"
        )
    return gaps


async def warn_cluster_gaps(redis: object) -> list[str]:
    """Logs (and returns) one warning per thing the cluster under ``redis``
    lacks; nothing for a single Redis."""
    if not isinstance(redis, RedisCluster):
        return []
    warnings: list[str] = []
    try:
        nodes = _nodes_text(await redis.execute_command("CLUSTER NODES", target_nodes=redis.RANDOM))
    except RedisError as exc:
        nodes = ""
        warnings.append(f"cannot read CLUSTER NODES ({exc}): replicas not checked")
    lonely = masters_without_replica(nodes) if nodes else []
    if lonely:
        warnings.append(
            f"master(s) {', '.join(lonely)} have no replica: a master's death loses "
            "its slots until it comes back"
        )
    found: dict[str, list[str]] = {}
    for node in redis.get_primaries():
        try:
            config = {}
            for name in ("appendonly", "cluster-require-full-coverage", "min-replicas-to-write"):
                reply = await redis.execute_command("CONFIG GET", name, target_nodes=node)
                config.update({_text(k): _text(v) for k, v in _pairs(reply)})
        except ResponseError as exc:
            warnings.append(
                f"cannot read the cluster's settings with CONFIG GET ({exc}): "
                "appendonly, cluster-require-full-coverage, min-replicas-to-write not checked"
            )
            break
        except RedisError as exc:
            warnings.append(f"cannot read the settings of master {node.name} ({exc})")
            continue
        for gap in config_gaps(config):
            found.setdefault(gap, []).append(node.name)
    for gap, names in found.items():
        warnings.append(f"master(s) {', '.join(sorted(names))} lack {gap}")
    for line in warnings:
        logger.warning("Redis Cluster: %s (docs/fleet.md)", line)
    return warnings


def _pairs(reply: Any) -> list[tuple[Any, Any]]:
    if isinstance(reply, dict):
        return list(reply.items())
    items = list(reply or [])
    return list(zip(items[::2], items[1::2], strict=False))


def _nodes_text(reply: Any) -> str:
    """``CLUSTER NODES`` as its text, whether redis-py parsed it (a dict of
    address -> fields) or not."""
    if not isinstance(reply, dict):
        return _text(reply)
    lines = []
    for addr, n in reply.items():
        slots = " ".join("-".join(map(str, r)) for r in n.get("slots") or [])
        link = "connected" if n.get("connected") else "disconnected"
        lines.append(
            f"{n.get('node_id')} {_text(addr)}@0 {n.get('flags')} {n.get('master_id')} "
            f"0 0 {n.get('epoch')} {link} {slots}".rstrip()
        )
    return "\n".join(lines)
