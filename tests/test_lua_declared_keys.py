"""Every frontier script against Redis Cluster's rules for a slot that moves
(issue 35 item 3).

Each script declares its shard's ``ready`` and ``slotguard`` keys
(keys.py ``script_keys``) and touches only keys of its shard (one slot),
never the guard: read from MONITOR on a real redis-server, command by
command, with the keys Redis itself finds in them (COMMAND GETKEYS). On a
real Redis Cluster, a script whose slot is held half-migrated (its keys all
on the source, split, all on the target) is refused whole, nothing written
on either node; once the slot has moved it runs and answers right.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from crawlproject.frontier.claims.address_scripts import (
    AddressClient,
    AddressTiming,
    PlaceAsk,
    PlaceRelease,
    Wake,
)
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import AdaptiveDelay, HostBudget
from crawlproject.frontier.store.redis_frontier import (
    FRONTIER_SCRIPTS,
    RedisFrontier,
    Release,
    load_lua,
)
from crawlproject.frontier.store.seen_set import SeenFilter
from crawlproject.lua import load_script
from crawlproject.recrawl.store import RecrawlStore
from crawlproject.redis_calls import NOT_RUN
from crawlproject.robots.policy import RobotsKind, RobotsRecord
from crawlproject.robots.store import RobotsStore
from testkit.entries import entry
from testkit.redis_cluster import RedisCluster, redis_cli
from testkit.redis_server import RedisServer

ADDRESS = "10.0.0.1"
GUARD = b"slotguard"
ARG = re.compile(rb'"((?:\\.|[^"\\])*)"')
ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}


def timing(lease_ms: int = 60_000) -> AddressTiming:
    return AddressTiming(
        lease_ms=lease_ms, reserve_ms=5_000, block_ms=30_000, delay_ms=100,
        adaptive=AdaptiveDelay(), host_delay_ms=0, host_concurrency=1,
    )  # fmt: skip


def unescape(arg: bytes) -> bytes:
    """An argument as MONITOR writes it (sdscatrepr), back to its bytes."""
    out, i = bytearray(), 0
    while i < len(arg):
        c = arg[i : i + 1]
        if c != b"\\":
            out += c
            i += 1
            continue
        nxt = arg[i + 1 : i + 2]
        if nxt == b"x":
            out.append(int(arg[i + 2 : i + 4], 16))
            i += 4
        else:
            out += ESCAPES.get(nxt, nxt)
            i += 2
    return bytes(out)


def script_runs(text: bytes) -> list[tuple[list[bytes], list[list[bytes]]]]:
    """Per EVALSHA in a MONITOR log: its arguments, and those of each command
    its script ran (the lines marked ``lua`` after it)."""
    runs: list[tuple[list[bytes], list[list[bytes]]]] = []
    for line in text.splitlines():
        head, _, rest = line.partition(b"] ")
        argv = [unescape(a) for a in ARG.findall(rest)]
        if not argv:
            continue
        if head.endswith(b" lua"):
            assert runs, line
            runs[-1][1].append(argv)
        elif argv[0].upper() in (b"EVALSHA", b"EVAL"):
            runs.append((argv, []))
    return runs


class Monitor:
    """``redis-cli monitor`` on a server, to a file."""

    def __init__(self, port: int, path: Path) -> None:
        self.path = path
        self._out = path.open("wb")
        self.proc = subprocess.Popen(
            [redis_cli(), "-p", str(port), "monitor"], stdout=self._out, stderr=subprocess.DEVNULL
        )
        time.sleep(0.2)  # until it is attached (it prints OK first)

    def stop(self) -> bytes:
        time.sleep(0.2)
        self.proc.terminate()
        self.proc.wait(10)
        self._out.close()
        return self.path.read_bytes()


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        yield s


def script_names(*groups: dict[str, Any]) -> dict[bytes, str]:
    names = {s.sha.encode(): name for group in groups for name, s in group.items()}
    seen_init = load_script("crawlproject.frontier.store", "seen_init")
    names[hashlib.sha1(seen_init.encode()).hexdigest().encode()] = "seen_init"
    trim = load_lua("trim_start_urls", False)
    names[hashlib.sha1(trim.encode()).hexdigest().encode()] = "trim_start_urls"
    return names


async def every_script(f: RedisFrontier, bloom: RedisFrontier, ac: AddressClient) -> None:
    """Runs each frontier script at least once, on data that makes it work."""
    await bloom.prepare()  # seen_init
    await bloom.add([entry("http://b.test/1")])
    await f.add([entry(f"http://h{h}.test/{i}") for h in range(4) for i in range(4)])
    # A seen hit, and over.test's third URL waits over its budget.
    await f.add([entry("http://h0.test/0"), *(entry(f"http://over.test/{i}") for i in range(3))])
    leases = [lease for s in range(f.keys.shards) for lease, _ in (await f.claim(s, 10, "w")).items]
    assert len(leases) >= 4
    waits, _ = await ac.take([PlaceAsk(lease, "x", ADDRESS, 1) for lease in leases[:2]])
    assert waits[0] == 0 and waits[1] > 0
    await ac.renew([(ADDRESS, leases[0].token)])
    await ac.release([PlaceRelease(leases[0].token, ADDRESS, 1, 0)])
    await ac.wait([(leases[1], 50)])
    await ac.wake([Wake("h1.test", 0)])
    await f.renew(leases[2:])
    await f.release([Release(leases[2], 0)])
    await f.ack([leases[2], leases[3]])
    await f.set_host_config("h2.test", 10, 2)
    await f.park_host("h3.test")
    await f.unpark_all()
    await f.release_over_budget()
    await asyncio.sleep(0.35)  # the rest of the leases expire
    reclaimed = [(await f.reclaim(s))[0] for s in range(f.keys.shards)]
    assert sum(reclaimed) > 0
    await f.trim_start_urls(await f.read_start_urls(1))


# The scripts run once per call id: one more key, on the slot of their others.
ONCE_PER_CALL = {*FRONTIER_SCRIPTS, "get_or_lock", "put_unlock", "recrawl_promote"}


@pytest.mark.parametrize("mode", ["score", "credit"])
def test_each_script_declares_its_slot_and_touches_only_its_keys(
    server: RedisServer, tmp_path: Path, mode: str
) -> None:
    monitor = Monitor(server.port, tmp_path / "monitor.log")

    async def run() -> dict[bytes, str]:
        r = Redis.from_url(server.url)
        try:
            keys = CrawlKeys("dk", 3)
            budget = HostBudget(base=2)  # 2 URLs a host, more wait over its budget
            f = RedisFrontier(r, keys, 0, 1, 300, priority_mode=mode, budget=budget)
            await f.prepare()
            await r.lpush(keys.start_urls, b"http://s.test/")
            bloom = RedisFrontier(
                r, CrawlKeys("dkb", 2), 0, 1, 300, seen=SeenFilter("bloom", capacity=1000)
            )
            ac = AddressClient(r, keys, timing())
            await every_script(f, bloom, ac)
            # Scripts of other packages on a frontier shard's slot.
            robots, recrawl = RobotsStore(r, keys, 60_000), RecrawlStore(r, keys)
            _, locked = await robots.get_or_lock(1, "http://a.test", 0, "w", 10_000)
            assert locked
            record = RobotsRecord(RobotsKind.OK, 200, 0, 10**13, b"User-agent: *")
            await robots.put_and_unlock(1, "http://a.test", record, "w")
            await recrawl.promote(2, 0, 10, 100, 0, 1, "parse", "", everything=True)
            for k in [*CrawlKeys("dk", 3).shard_prefixes, *CrawlKeys("dkb", 2).shard_prefixes]:
                assert not await r.exists(k + "slotguard")
            other = {
                "get_or_lock": robots._get_or_lock,
                "put_unlock": robots._put_unlock,
                "recrawl_promote": recrawl._promote,
            }
            return script_names(f._scripts, ac._scripts, other)
        finally:
            await r.aclose()

    names = asyncio.run(run())
    runs = script_runs(monitor.stop())
    plain = redis.Redis(port=server.port)
    plain.set_response_callback("COMMAND", lambda reply, **_: reply)  # GETKEYS as sent
    ran: set[str] = set()
    for argv, commands in runs:
        name = names.get(argv[1].lower())
        assert name is not None, f"a script not of the frontier: {argv[:4]}"
        ran.add(name)
        declared = argv[3 : 3 + int(argv[2])]
        call_key = b""
        if name in ONCE_PER_CALL:  # its last key: its call's reply (lua.py once_per_call)
            call_key = declared.pop()
            assert call_key.startswith(declared[-1][: declared[-1].index(b"}:") + 2] + b"c:")
        guards = [k for k in declared if k.endswith(b":" + GUARD)]
        if name == "trim_start_urls":  # one key, not in a shard: all it touches is declared
            assert declared == [plain_start_urls()] and not guards
        elif name in ("get_or_lock", "put_unlock"):  # r:, rl:, and the shard's slotguard
            prefix = declared[2][: -len(GUARD)]
            assert [k[: len(prefix)] for k in declared] == [prefix] * 3 and len(guards) == 1
        else:
            # ready routes the call, slotguard holds it off while its slot moves
            prefix = declared[0][: -len(b"ready")]
            assert declared == [prefix + b"ready", prefix + GUARD], (name, declared)
            assert prefix.startswith(b"cp:{") and prefix.endswith(b"}:")
        for cmd in commands:
            touched = command_keys(plain, cmd)
            for key in touched:
                assert key not in guards and not key.endswith(b":" + GUARD), (name, cmd)
                if key == call_key:
                    continue  # read, or written with the reply, by the wrapper
                if guards:
                    assert key.startswith(prefix), (name, cmd)  # its shard's slot
                else:
                    assert key in declared, (name, cmd)
    plain.close()
    assert ran == {
        "add", "claim", "release", "ack", "renew", "reclaim", "host_config", "park_host",
        "unpark", "budget_release", "address_take", "address_release", "address_renew",
        "address_wait", "address_wake", "seen_init", "trim_start_urls", "get_or_lock",
        "put_unlock", "recrawl_promote",
    }  # fmt: skip


def plain_start_urls() -> bytes:
    return CrawlKeys("dk", 3).start_urls.encode()


_NO_KEYS = ("TIME",)


def command_keys(r: redis.Redis, argv: list[bytes]) -> list[bytes]:
    """The keys of one command, as Redis finds them in it."""
    if argv[0].upper().decode() in _NO_KEYS:
        return []
    try:
        return list(r.execute_command("COMMAND", "GETKEYS", *argv))
    except ResponseError as exc:  # a command without keys
        assert "no key arguments" in str(exc).lower() or "invalid" in str(exc).lower(), argv
        return []


# -- a real cluster, a slot held half-migrated ------------------------------------------


def key_slot(key: str) -> int:
    from redis.crc import key_slot as slot_of

    return int(slot_of(key.encode()))


def slot_contents(
    cluster: RedisCluster, ports: list[int], slot: int
) -> dict[tuple[int, bytes], Any]:
    """Every key of ``slot`` on each node of ``ports``, and its DUMP."""
    out: dict[tuple[int, bytes], Any] = {}
    for port in ports:
        node = redis.Redis(port=port)
        try:
            for key in node.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100_000):
                pipe = node.pipeline(transaction=False)
                pipe.execute_command("ASKING")  # the target serves a key it imports if asked
                pipe.execute_command("DUMP", key)
                out[(port, key)] = pipe.execute()[1]
        finally:
            node.close()
    return out


def migrate(src: int, dst: int, keys: list[bytes]) -> None:
    if keys:
        node = redis.Redis(port=src)
        try:
            node.execute_command("MIGRATE", "127.0.0.1", dst, "", 0, 5000, "KEYS", *keys)
        finally:
            node.close()


def node_id(port: int) -> str:
    node = redis.Redis(port=port)
    try:
        return str(node.execute_command("CLUSTER", "MYID").decode())
    finally:
        node.close()


Op = Callable[[], Awaitable[Any]]


def test_a_script_on_a_slot_in_migration_is_refused_whole_and_runs_once_it_moved() -> None:
    cluster = RedisCluster().start()
    try:
        asyncio.run(half_migrated(cluster))
    finally:
        cluster.stop()


async def half_migrated(cluster: RedisCluster) -> None:
    # A short outage bound: a refused call gives up in about a second.
    r = redis_client(cluster.url, outage_seconds=0.3)
    try:
        keys = CrawlKeys("mig", 1)
        f = RedisFrontier(r, keys, 0, 1, 60_000, budget=HostBudget(base=2))
        await f.prepare()
        ac = AddressClient(r, keys, timing())
        await f.add([entry(f"http://h{h}.test/{i}") for h in range(6) for i in range(3)])
        await f.add([entry(f"http://over.test/{i}") for i in range(3)])
        leases = [lease for lease, _ in (await f.claim(0, 4, "w")).items]
        assert len(leases) == 4
        await ac.take([PlaceAsk(lease, "x", ADDRESS, 1) for lease in leases[:2]])
        before = await f.counters()

        slot = key_slot(keys.ready(0))
        src = cluster.master_of_slot(slot)
        dst = next(p for p in cluster.masters().values() if p != src)
        src_id, dst_id = node_id(src), node_id(dst)
        # The replies of the calls above (lua.py once_per_call), answered: gone,
        # so that none expires (in 30.3 s here) while the slot is compared.
        node = redis.Redis(port=src)
        node.delete(*(k for _, k in slot_contents(cluster, [src], slot) if b"}:c:" in k))
        node.close()
        cluster.command(dst, "cluster", "setslot", str(slot), "importing", src_id)
        cluster.command(src, "cluster", "setslot", str(slot), "migrating", dst_id)
        slot_keys = sorted(k for _, k in slot_contents(cluster, [src], slot))
        assert len(slot_keys) > 20

        ops: dict[str, Op] = {
            "add": lambda: f.add([entry("http://new.test/1"), entry("http://h0.test/9")]),
            "claim": lambda: f.claim(0, 4, "w"),
            "release": lambda: f.release([Release(leases[0], 0)]),
            "ack": lambda: f.ack([leases[1]]),
            "renew": lambda: f.renew(leases),
            "reclaim": lambda: f.reclaim(0),
            "host_config": lambda: f.set_host_config("h5.test", 10, None),
            "park_host": lambda: f.park_host("h4.test"),
            "budget_release": lambda: f.release_over_budget(),
            "address_take": lambda: ac.take([PlaceAsk(leases[2], "x", ADDRESS, 1)]),
            "address_release": lambda: ac.release([PlaceRelease(leases[0].token, ADDRESS, 1, 0)]),
            "address_renew": lambda: ac.renew([(ADDRESS, leases[0].token)]),
            "address_wait": lambda: ac.wait([(leases[3], 50)]),
            "address_wake": lambda: ac.wake([Wake("h1.test", 0)]),
        }
        # All keys still on the source, split between the nodes, all moved
        # (before the slot is given to the target).
        done = 0
        for moved in (0, len(slot_keys) // 2, len(slot_keys)):
            migrate(src, dst, slot_keys[done:moved])
            done = moved
            held = slot_contents(cluster, [src, dst], slot)
            assert {k for _, k in held} == set(slot_keys)
            assert sum(p == dst for p, _ in held) == moved
            for name, op in ops.items():
                with pytest.raises(RedisError) as refused:
                    await op()
                # What the client resends (outage.py): the script did not run.
                assert isinstance(refused.value, NOT_RUN), (name, refused.value)
                assert slot_contents(cluster, [src, dst], slot) == held, (moved, name)

        # Calls made while the slot is in migration wait (a client with the
        # usual bound), and run once when the target owns it.
        waiting = redis_client(cluster.url, outage_seconds=60)
        try:
            fw = RedisFrontier(waiting, keys, 0, 1, 60_000, budget=HostBudget(base=2))
            pending = asyncio.gather(
                fw.add([entry("http://new.test/1"), entry("http://h0.test/0")]),
                fw.release([Release(leases[0], 0)]),
                fw.ack([leases[1]]),
            )
            await asyncio.sleep(1.5)
            assert not pending.done()
            assert await f.counters() == before

            def give_slot() -> None:
                for port in cluster.masters().values():
                    cluster.command(port, "cluster", "setslot", str(slot), "node", dst_id)

            await asyncio.to_thread(give_slot)
            added, released, acked = await asyncio.wait_for(pending, 30)
        finally:
            await waiting.aclose()
        assert (added.added, added.seen_hits) == (1, 1) and released == 1 and acked == (1, 0)
        assert await f.ack([leases[0]]) == (1, 0)
        after = await f.counters()
        for name, more in (("enqueued", 1), ("seen_hits", 1), ("releases", 1), ("done", 2)):
            assert after.get(name, 0) == before.get(name, 0) + more, name
        assert after["queued"] == before["queued"] + 1 and after["leased"] == before["leased"] - 2
        claimed = await f.claim(0, 10, "w")
        assert claimed.items
        assert (await f.counters())["claims"] == before["claims"] + len(claimed.items)
        assert not await r.exists(keys.script_keys(0)[1])
    finally:
        await r.aclose()
