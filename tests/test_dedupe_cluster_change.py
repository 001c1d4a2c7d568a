"""The spread duplicate index on a real Redis Cluster that changes under it
(issue 35): slots holding its parts moved live, key batch by key batch, while
several tasks judge pages through one client (as a worker's pages do); a
master killed -9 and its replica promoted. Nothing but a RedisError ever
leaves the index (the middleware then keeps the page); every verdict given is
right, during the change and after it. And the round trips themselves
(crawlproject/dedupe/calls.py): a call refused before it ran is sent again
alone, when its slot's move completes.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import threading
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import RedisError

from crawlproject.dedupe.calls import Call, send_calls
from crawlproject.dedupe.index import DedupeIndex, DedupeKind
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.redis_cluster import RedisCluster
from testkit.slot_migration import SlotMove, busiest_slots, move_slot
from tests.test_slot_migration_dedupe import dedupe_slots

TASKS = 6  # pages judged at once through one client, as a worker's are
Page = tuple[bytes, int, str, str]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    nodes = RedisCluster(replicas=1).start()
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
async def client(cluster: RedisCluster) -> AsyncIterator[Redis]:
    r = redis_client(cluster.url, outage_seconds=30)  # a worker's client
    yield r
    await r.aclose()


def _page(n: int, tag: str, simhash: int | None = None, body: bytes | None = None) -> Page:
    body = body if body is not None else os.urandom(16)
    simhash = simhash if simhash is not None else random.getrandbits(64)
    return hashlib.sha1(body).digest(), simhash, f"http://p{n}.{tag}.test/", f"p{n}.{tag}.test"


class Judge:
    """Judges pages whose right verdict is known: a copy of a stored page
    (exact), a near copy of one (near), a page never seen (new). Remembers
    the new pages stored, and every RedisError."""

    def __init__(self, index: DedupeIndex, tag: str) -> None:
        self.index = index
        self.tag = tag
        self.stored: list[Page] = []
        self.errors: list[RedisError] = []
        self.checked = 0
        self._n = 0

    def fresh(self) -> Page:
        self._n += 1
        return _page(self._n, self.tag)

    async def store(self, count: int) -> None:
        pages = [self.fresh() for _ in range(count)]
        for at in range(0, count, 16):
            verdicts = await self.index.check_and_add_many(pages[at : at + 16])
            assert [v.kind for v in verdicts] == [DedupeKind.NEW] * len(verdicts)
        self.stored += pages

    async def round(self, rng: random.Random) -> None:
        """One batch: an exact copy, a near copy and a new page. A RedisError
        is noted (the page would be kept); any other error fails the test."""
        original = rng.choice(self.stored)
        digest, simhash, url, host = original
        self._n += 1
        exact = (digest, simhash, f"http://copy{self._n}.{self.tag}.test/", host)
        near = _page(self._n, self.tag + "n", simhash ^ 0b1001)
        new = self.fresh()
        try:
            verdicts = await self.index.check_and_add_many([exact, near, new])
        except RedisError as exc:
            self.errors.append(exc)
            return
        self.checked += 1
        got = [(v.kind, v.original) for v in verdicts]
        assert got == [(DedupeKind.EXACT, url), (DedupeKind.NEAR, url), (DedupeKind.NEW, None)]
        self.stored.append(new)

    async def until(self, done: threading.Event | asyncio.Event, seed: int) -> None:
        rng = random.Random(seed)
        while not done.is_set():
            await self.round(rng)

    async def all_right(self) -> None:
        """After the change: every page stored is found (a copy of each is
        exact, with its URL), and a page never seen is new."""
        copies = [(d, s, f"http://again.{self.tag}.test/{n}", h)
                  for n, (d, s, _, h) in enumerate(self.stored)]  # fmt: skip
        for at in range(0, len(copies), 32):
            verdicts = await self.index.check_and_add_many(copies[at : at + 32])
            want = [(DedupeKind.EXACT, p[2]) for p in self.stored[at : at + 32]]
            assert [(v.kind, v.original) for v in verdicts] == want
        assert (await self.index.check_and_add(*self.fresh())).kind is DedupeKind.NEW


async def _judging_while(judges: list[Judge], change: threading.Event) -> None:
    await asyncio.gather(*(j.until(change, seed) for seed, j in enumerate(judges)))


async def test_index_rides_through_live_slot_moves(cluster: RedisCluster, client: Redis) -> None:
    """The busiest slots of the index move to the next master, 5 keys a
    MIGRATE, while 6 tasks judge pages: ASK, TRYAGAIN and MOVED on the way,
    and redis-py refreshing its slots under the other tasks' connections."""
    tag = uuid.uuid4().hex[:8]
    index = DedupeIndex(client, CrawlKeys(f"chg-{tag}", 1), k=3)
    judges = [Judge(index, f"{tag}-{t}") for t in range(TASKS)]
    for judge in judges:
        await judge.store(64)
    slots = busiest_slots(cluster, dedupe_slots(cluster, index.keys), 16)
    masters = sorted(cluster.masters().values())
    moved = threading.Event()

    def move_all() -> None:
        try:
            for slot in slots:
                src = cluster.master_of_slot(slot)
                move_slot(cluster, slot, masters[(masters.index(src) + 1) % len(masters)], 5, 0.01)
        finally:
            moved.set()

    mover = asyncio.ensure_future(asyncio.to_thread(move_all))
    await _judging_while(judges, moved)
    await mover
    assert not [e for j in judges for e in j.errors], "the index failed open while slots moved"
    assert all(j.checked for j in judges)
    for judge in judges:
        await judge.all_right()
    assert cluster.check().returncode == 0


async def test_refused_call_is_sent_again_alone(cluster: RedisCluster, client: Redis) -> None:
    """Calls on several slots in one round trip; one is refused (TRYAGAIN:
    its slot held migrating, its keys split) until another task completes the
    move: the others ran once, it runs once, its reply is its own."""
    tag = uuid.uuid4().hex[:8]
    held = [f"{{held-{tag}}}:a", f"{{held-{tag}}}:b"]
    others = [f"{{other{n}-{tag}}}:x" for n in range(8)]
    for key in held:
        await client.set(key, 10)
    script = client.register_script(
        "redis.call('INCR', KEYS[2]) return redis.call('INCR', KEYS[1])"
    )
    slot = key_slot(held[0].encode())
    masters = sorted(cluster.masters().values())
    src = cluster.master_of_slot(slot)
    move = SlotMove(cluster, slot, src, masters[(masters.index(src) + 1) % len(masters)]).begin()
    move.move_keys([held[1]])  # a on the source, b on the target: TRYAGAIN
    calls = [Call(None, [key], [], "INCR") for key in others] + [Call(script, held, [])]
    sending = asyncio.ensure_future(send_calls(client, calls))
    await asyncio.sleep(0.5)
    assert not sending.done()
    assert [int(v) for v in await client.mget_nonatomic(others)] == [1] * len(others)
    source = redis.Redis(port=src)
    try:
        assert source.get(held[0]) == b"10"  # refused: not run
    finally:
        source.close()
    await asyncio.to_thread(move.finish)
    assert await sending == [1] * len(others) + [11]
    # The others were not sent again.
    assert [int(v) for v in await client.mget_nonatomic(others)] == [1] * len(others)
    assert [int(await client.get(key)) for key in held] == [11, 11]


async def test_index_rides_through_a_master_killed(cluster: RedisCluster, client: Redis) -> None:
    """A master holding parts of the index is killed -9 while 6 tasks judge
    pages; its replica is promoted (node timeout 2 s + election). Meanwhile a
    check may fail (a RedisError: the page is kept), never otherwise; every
    verdict given is right; after the promotion the index answers as before
    (the pages stored before the kill were replicated)."""
    tag = uuid.uuid4().hex[:8]
    index = DedupeIndex(client, CrawlKeys(f"kill-{tag}", 1), k=3)
    judges = [Judge(index, f"{tag}-{t}") for t in range(TASKS)]
    for judge in judges:
        await judge.store(32)
    victim = cluster.master_of_slot(busiest_slots(cluster, dedupe_slots(cluster, index.keys), 1)[0])
    replica = cluster.replica_of(victim)
    cluster.wait_replicas_synced()
    # Killed before the tasks start: no write of theirs is acknowledged by
    # the victim and then lost with it (asynchronous replication).
    cluster.kill(victim)
    # A call that cannot be sent again (INCR), through a client that never
    # connected to the victim: refused connections wrote nothing, so it is
    # sent again until the replica serves its slot, and runs once.
    fresh = redis_client(cluster.url, outage_seconds=30)
    owners = cluster.slot_ranges()
    names = (f"{{kill-{tag}-{n}}}:n" for n in range(100_000))
    key = next(k for k in names if owners.get(key_slot(k.encode())) == victim)
    incr = asyncio.ensure_future(send_calls(fresh, [Call(None, [key], [], "INCR")]))
    promoted = threading.Event()

    def wait_promoted() -> None:
        try:
            cluster.wait_promoted(replica)
        finally:
            promoted.set()

    killer = asyncio.ensure_future(asyncio.to_thread(wait_promoted))
    await _judging_while(judges, promoted)
    await killer
    assert await incr == [1]
    await fresh.aclose()
    calm = asyncio.Event()
    settle = asyncio.ensure_future(asyncio.sleep(1.0))
    settle.add_done_callback(lambda _: calm.set())
    await asyncio.gather(*(j.until(calm, 100 + n) for n, j in enumerate(judges)))
    assert all(j.checked for j in judges)
    for judge in judges:
        judge.errors.clear()
        await judge.all_right()
