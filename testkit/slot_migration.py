"""Moving a hash slot between masters of a running Redis Cluster, as
``redis-cli --cluster reshard`` and Redis's own ``04-resharding.tcl`` do:
``CLUSTER SETSLOT s IMPORTING src`` on the target, ``CLUSTER SETSLOT s
MIGRATING dst`` on the source, ``CLUSTER GETKEYSINSLOT`` + ``MIGRATE ... KEYS``
batch by batch, then ``CLUSTER SETSLOT s NODE dst`` on the target, the source
and every other master.

A :class:`SlotMove` can stop halfway: :meth:`SlotMove.begin`, some keys moved
with :meth:`SlotMove.move_keys`, and the slot stays half-migrated (what a
crawl meets while an operator reshards) until :meth:`SlotMove.finish`.
:func:`slot_dumps` reads every key of a slot on both sides, so a test can tell
whether a script ran whole, not at all, or half.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import redis

if TYPE_CHECKING:
    from testkit.redis_cluster import RedisCluster

MIGRATE_TIMEOUT_MS = 5000
T = TypeVar("T")


class MigrationError(RuntimeError):
    """A step of a slot move refused (MIGRATE's BUSYKEY: the target already
    holds a key the source still has, i.e. a script created it there)."""


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=10)


def node_id(port: int) -> str:
    client = _client(port)
    try:
        return str(client.execute_command("CLUSTER", "MYID").decode())
    finally:
        client.close()


def keys_in_slot(port: int, slot: int, limit: int = 1_000_000) -> list[bytes]:
    """The keys of ``slot`` stored on the node at ``port`` (its own, not the slot's)."""
    client = _client(port)
    try:
        return list(client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, limit))
    finally:
        client.close()


def key_slot(port: int, key: str | bytes) -> int:
    client = _client(port)
    try:
        return int(client.execute_command("CLUSTER", "KEYSLOT", key))
    finally:
        client.close()


class SlotMove:
    """One slot on its way from the master at ``src`` to the master at ``dst``."""

    def __init__(self, cluster: RedisCluster, slot: int, src: int, dst: int) -> None:
        if src == dst:
            raise ValueError(f"slot {slot}: source and target are both port {src}")
        self.cluster = cluster
        self.slot = slot
        self.src = src
        self.dst = dst
        self.moved = 0

    def begin(self) -> SlotMove:
        """IMPORTING on the target first, then MIGRATING on the source (the
        order redis-cli uses: a client sent ASK always finds the target ready)."""
        src_id, dst_id = node_id(self.src), node_id(self.dst)
        self._ok(self.dst, "CLUSTER", "SETSLOT", self.slot, "IMPORTING", src_id)
        self._ok(self.src, "CLUSTER", "SETSLOT", self.slot, "MIGRATING", dst_id)
        return self

    def pending(self) -> list[bytes]:
        """The slot's keys still on the source."""
        return keys_in_slot(self.src, self.slot)

    def move_keys(self, keys: Sequence[bytes | str], source: redis.Redis | None = None) -> int:
        """MIGRATE ``keys`` (in one call) from the source to the target; no
        REPLACE, so a key the target already holds is an error, not lost."""
        if not keys:
            return 0
        client = source or _client(self.src)
        try:
            reply = client.execute_command(
                "MIGRATE", "127.0.0.1", self.dst, "", 0, MIGRATE_TIMEOUT_MS, "KEYS", *keys
            )
        except redis.ResponseError as exc:
            raise MigrationError(f"slot {self.slot}: MIGRATE {len(keys)} keys: {exc}") from exc
        finally:
            if source is None:
                client.close()
        if reply not in (b"OK", b"NOKEY", "OK", "NOKEY"):
            raise MigrationError(f"slot {self.slot}: MIGRATE answered {reply!r}")
        self.moved += len(keys)
        return len(keys)

    def move_batches(self, batch: int = 10, pause: float = 0.02, limit: int | None = None) -> int:
        """Moves the source's keys ``batch`` at a time, ``pause`` s between
        batches (so running clients meet the half-moved slot); at most
        ``limit`` keys (None: all). Returns how many were moved."""
        moved = 0
        source = _client(self.src)
        try:
            while limit is None or moved < limit:
                size = batch if limit is None else min(batch, limit - moved)
                keys = source.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, size)
                if not keys:
                    break
                moved += self.move_keys(keys, source)
                if pause:
                    time.sleep(pause)
        finally:
            source.close()
        return moved

    def finish(self, batch: int = 10, pause: float = 0.0) -> None:
        """Moves what is left, then gives the slot to the target: on the
        target, the source, and every other master (as redis-cli does)."""
        self.move_batches(batch, pause)
        dst_id = node_id(self.dst)
        self._ok(self.dst, "CLUSTER", "SETSLOT", self.slot, "NODE", dst_id)
        self._ok(self.src, "CLUSTER", "SETSLOT", self.slot, "NODE", dst_id)
        for port in self.cluster.masters().values():
            if port not in (self.src, self.dst):
                self._ok(port, "CLUSTER", "SETSLOT", self.slot, "NODE", dst_id)

    def _ok(self, port: int, *args: str | int) -> None:
        client = _client(port)
        try:
            client.execute_command(*args)
        except redis.ResponseError as exc:
            raise MigrationError(f"{' '.join(map(str, args))} on port {port}: {exc}") from exc
        finally:
            client.close()


def move_slot(
    cluster: RedisCluster, slot: int, dst: int, batch: int = 10, pause: float = 0.02
) -> int:
    """Moves ``slot`` to the master at ``dst`` live, ``batch`` keys at a time;
    returns how many keys moved."""
    move = SlotMove(cluster, slot, cluster.master_of_slot(slot), dst).begin()
    move.move_batches(batch, pause)
    move.finish(batch)
    return move.moved


def busiest_slots(cluster: RedisCluster, slots: Iterable[int], n: int) -> list[int]:
    """The ``n`` slots of ``slots`` holding the most keys (``CLUSTER
    COUNTKEYSINSLOT`` on each slot's master), busiest first."""
    owners = cluster.slot_ranges()
    by_master: dict[int, list[int]] = {}
    for slot in set(slots):
        port = owners.get(slot)
        if port is None:
            raise RuntimeError(f"no master serves slot {slot}")
        by_master.setdefault(port, []).append(slot)
    counts: dict[int, int] = {}
    for port, mine in by_master.items():
        client = _client(port)
        try:
            pipe = client.pipeline(transaction=False)
            for slot in mine:
                pipe.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
            counts.update(zip(mine, map(int, pipe.execute()), strict=True))
        finally:
            client.close()
    return sorted(counts, key=lambda s: (-counts[s], s))[:n]


def slot_dumps(src: int, dst: int, slot: int) -> dict[bytes, tuple[str, bytes]]:
    """Every key of ``slot`` on the source and target: key -> (side, DUMP).
    On the importing target each DUMP follows ASKING. A key held on both
    sides is an error (a script created it on the target while the source
    still had it: the move cannot finish without losing one). Calls' replies
    (``c:<call id>``, crawlproject/lua.py once_per_call) are left out: they
    expire on their own, and GETKEYSINSLOT still lists one expired and not yet
    evicted, whose DUMP a migrating source answers with ASK."""
    out: dict[bytes, tuple[str, bytes]] = {}
    for side, port in (("source", src), ("target", dst)):
        keys = [k for k in keys_in_slot(port, slot) if b"}:c:" not in k]
        client = _client(port)
        try:
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.execute_command("ASKING")
                pipe.dump(key)
            replies = pipe.execute()[1::2] if keys else []
        finally:
            client.close()
        for key, dumped in zip(keys, replies, strict=True):
            if key in out:
                raise MigrationError(f"slot {slot}: key {key!r} is on both the source and target")
            if dumped is not None:
                out[key] = (side, dumped)
    return out


LAYOUTS = ("source", "target", "split")  # where a held slot's keys are


def place_keys(move: SlotMove, layout: str) -> None:
    """Moves the keys of a begun move so that they sit as ``layout`` says:
    all on the source, all on the target, or split (every second key, in name
    order, on the target)."""
    keys = sorted(move.pending())
    if layout == "target":
        move.move_keys(keys)
    elif layout == "split":
        move.move_keys(keys[1::2])
    elif layout != "source":
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")


def _contents(dumps: dict[bytes, tuple[str, bytes]]) -> dict[bytes, bytes]:
    return {key: dumped for key, (_, dumped) in dumps.items()}


async def run_held(
    cluster: RedisCluster,
    slots: Iterable[int],
    layout: str,
    operation: Callable[[], Awaitable[T]],
    hold: float = 1.0,
    timeout: float = 30.0,
) -> HeldRun[T]:
    """Runs ``operation`` while each of ``slots`` is held half-migrated (to
    the next master) with its keys as ``layout`` says, then completes the
    moves and returns the operation's result.

    While held, a call still running must have changed nothing: every key of
    each slot (on either side) equal, DUMP for DUMP, to what it was before the
    move began. A call that ended while held ran whole (its answer is then
    the caller's to check). An error of the call, a key on both sides, or a
    move that cannot finish, raises."""
    masters = sorted(cluster.masters().values())
    moves: list[SlotMove] = []
    before: dict[int, dict[bytes, bytes]] = {}
    for slot in sorted(set(slots)):
        src = cluster.master_of_slot(slot)
        dst = masters[(masters.index(src) + 1) % len(masters)]
        before[slot] = _contents(slot_dumps(src, dst, slot))
        move = SlotMove(cluster, slot, src, dst).begin()
        place_keys(move, layout)
        moves.append(move)
    task = asyncio.ensure_future(operation())
    done, _ = await asyncio.wait({task}, timeout=hold)
    changed: list[bytes] = []
    for move in moves:
        during = _contents(await asyncio.to_thread(slot_dumps, move.src, move.dst, move.slot))
        if not done and during != before[move.slot]:
            changed += sorted(k for k in {*during, *before[move.slot]}
                              if during.get(k) != before[move.slot].get(k))  # fmt: skip
    for move in moves:
        await asyncio.to_thread(move.finish)
    result = await asyncio.wait_for(task, timeout)
    if changed:
        raise AssertionError(f"a call held off by the move changed keys (half-applied): {changed}")
    return HeldRun(result, bool(done))


@dataclass(frozen=True)
class HeldRun(Generic[T]):
    result: T
    ran_while_held: bool  # the call ended while its slots were half-migrated
