"""A reply lost after Redis ran the command (issue 35, item 3): nothing runs
twice behind the crawl's back, and what our own code sends again is safe.

Each test sends through testkit/tcp_proxy.py, which forwards a command to a
real redis-server and then shuts the connection down before the reply
reaches the client (``drop_next_reply``). The plain and embedded clients the
project builds (redis_client.py, embedded.py) must raise the connection error
instead of sending the command again themselves; the cluster client still
sends it again (redis-py's retry), so each script that changes state runs
once per call id (lua.py once_per_call): sent again under its id, by redis-py
or by our loops (the outbox's failed batch), it answers its first run's reply
(tests/test_call_ids.py: a one-node cluster's resends, the outbox's); so
does each counter (crawlproject/increments.py: a worker's fleet report, sent
again under its call id, counts once). Each
frontier script our loops send again after such an error (add, ack,
release, renew; claim is sent anew) must then leave the same Redis state
as a single run; the duplicate index's exact check is not sent again.
Counterparts on a crawl of their own run once.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from crawlproject.dedupe.index import DedupeIndex, DedupeKind, index_figures
from crawlproject.dedupe.spread import EXACT
from crawlproject.frontier.claims.address_scripts import (
    AddressClient,
    AddressTiming,
    PlaceAsk,
    PlaceRelease,
)
from crawlproject.frontier.connection.embedded import EmbeddedRedis
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import AdaptiveDelay
from crawlproject.frontier.store.redis_frontier import Lease, RedisFrontier, Release
from crawlproject.status.fleet_counters import FleetCounters
from testkit.entries import CODEC, entry
from testkit.redis_server import RedisServer
from testkit.tcp_proxy import TcpProxy

ADDRESS = "203.0.113.7"
TIMING = AddressTiming(
    lease_ms=60_000,
    reserve_ms=5_000,
    block_ms=30_000,
    delay_ms=400,  # address mode: the address keeps its own delay and 429 penalty
    adaptive=AdaptiveDelay(),
    host_delay_ms=60_000,
    host_concurrency=1,
)
URLS = ["http://a.test/1", "http://a.test/2", "http://b.test/1", "http://c.test/1"]
# A number this large in the state is a time (s or ms: meta `created`, a
# host's `next`, lease expiries): compared as "T", as the two crawls run apart.
TIMESTAMP = 1e9


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[TcpProxy]:
    with TcpProxy("127.0.0.1", redis_server.port) as p:
        yield p


@pytest.fixture
async def direct(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def lost(proxy: TcpProxy, call: Callable[[], Awaitable[Any]], to: bytes = b"EVALSHA") -> None:
    """``call`` with the reply to its request containing ``to`` lost: the
    caller sees a connection error."""
    before = proxy.dropped
    proxy.drop_next_reply(to)
    with pytest.raises(RedisConnectionError):
        await call()
    assert proxy.dropped == before + 1


# -- the clients: no resend of their own ---------------------------------------------


async def test_a_lost_reply_reaches_the_caller_and_the_command_ran_once(
    proxy: TcpProxy, direct: Redis
) -> None:
    """A plain client's connections must not resend: redis-py's ``Redis(...)``
    default (``Retry`` with 10 retries) would send INCR, the script and the
    pipeline again on a new connection (2, no error). ``from_url`` pools had
    no retry already; the project's clients now say so explicitly."""
    client = redis_client(proxy.redis_url, client_name="lost-reply")
    assert await client.ping()
    await lost(proxy, lambda: client.incr("k"), b"INCR")
    assert await direct.get("k") == b"1"
    incr = "return redis.call('INCR', KEYS[1])"
    await lost(proxy, lambda: client.eval(incr, 1, "s"), b"EVAL")
    assert await direct.get("s") == b"1"
    pipe = client.pipeline(transaction=False)
    pipe.incr("p")
    pipe.incr("q")
    await lost(proxy, pipe.execute, b"INCR")
    assert await direct.mget("p", "q") == [b"1", b"1"]
    assert await client.incr("k") == 2  # the client connects again for the next command
    await client.aclose()


async def test_a_connection_that_cannot_be_opened_is_waited_out(
    proxy: TcpProxy, direct: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing was sent over a refused connection (a Redis restarting): the
    client waits, within its bound, and the command runs once."""
    proxy.cut()
    client = redis_client(proxy.redis_url, outage_seconds=30)
    pending = asyncio.ensure_future(client.incr("k"))
    while "not reachable yet" not in caplog.text:  # refused once: the client waits
        assert not pending.done()
        await asyncio.sleep(0.01)
    proxy.restore()
    assert await pending == 1
    assert await direct.get("k") == b"1"
    await client.aclose()


async def test_the_embedded_redis_client_resends_nothing(tmp_path: Any) -> None:
    embedded = EmbeddedRedis(str(tmp_path))
    client = await embedded.connect(client_name="crawlproject-worker:lost-reply")
    try:
        connection = client.connection_pool.make_connection()
        assert connection.retry.get_retries() == 0
    finally:
        assert await embedded.leave(client, "lost-reply")


# -- the frontier's scripts: sent again by our loops, applied once ---------------------


def norm(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return "T" if number >= TIMESTAMP else value


async def crawl_state(redis: Redis, crawl: str) -> dict[str, Any]:
    """Every key of ``crawl``, by name without the crawl, times as "T"."""
    state: dict[str, Any] = {}
    async for raw in redis.scan_iter(match=f"cp:{{{crawl}*", count=1000):
        key = raw.decode()
        if re.match(r"cp:\{[^}]*\}:c:", key):
            continue  # a call's reply (lua.py once_per_call): its id differs per crawl
        kind = (await redis.type(raw)).decode()
        value: Any
        if kind == "string":
            value = norm(await redis.get(raw))
        elif kind == "hash":
            value = {f: norm(v) for f, v in (await redis.hgetall(raw)).items()}
        elif kind == "list":
            value = [norm(v) for v in await redis.lrange(raw, 0, -1)]
        elif kind == "zset":
            value = [(m, norm(s)) for m, s in await redis.zrange(raw, 0, -1, withscores=True)]
        elif kind == "set":
            value = sorted(await redis.smembers(raw))
        else:
            value = kind
        # The crawl's name, and its shards' tag suffixes (`~n`, picked per
        # crawl to spread the shards over the slots: keys.py), left out.
        state[re.sub(r"^cp:\{[^/}~]*(/[^}~]*)?(~\d+)?\}", r"cp:{C\1}", key)] = value
    return state


Pair = tuple[RedisFrontier, RedisFrontier]


@pytest.fixture
async def pair(proxy: TcpProxy, redis_url: str) -> AsyncIterator[Pair]:
    """Two crawls on one Redis: ``once`` (a direct client: every call runs
    once) and ``lost`` (a worker's client through the proxy)."""
    clients = [Redis.from_url(redis_url), redis_client(proxy.redis_url)]
    frontiers = []
    for client, crawl in zip(clients, ("once", "lost"), strict=True):
        f = RedisFrontier(client, CrawlKeys(crawl, 2), 60_000, 1, 60_000)
        await f.prepare()
        frontiers.append(f)
    yield frontiers[0], frontiers[1]
    for c in clients:
        await c.aclose()


async def same_state(direct: Redis) -> tuple[dict[str, Any], dict[str, Any]]:
    return await crawl_state(direct, "once"), await crawl_state(direct, "lost")


async def claim_every_shard(f: RedisFrontier) -> list[Lease]:
    leases: list[Lease] = []
    for shard in range(f.keys.shards):
        leases += [lease for lease, _ in (await f.claim(shard, 100, "w1")).items]
    return sorted(leases, key=lambda lease: (lease.shard, lease.id))


async def test_release_and_ack_sent_again_free_and_count_once(
    pair: Pair, proxy: TcpProxy, direct: Redis
) -> None:
    once, twice = pair
    for f in pair:
        await f.add([entry(u) for u in URLS])
    leases = {f: await claim_every_shard(f) for f in pair}
    assert [len(v) for v in leases.values()] == [3, 3]  # one per host
    assert await once.renew(leases[once]) == []
    await lost(proxy, lambda: twice.renew(leases[twice]))
    assert await twice.renew(leases[twice]) == []
    a, b = await same_state(direct)
    assert a == b
    releases = {f: [Release(lease, 5) for lease in leases[f]] for f in pair}
    assert await once.release(releases[once]) == 3
    await lost(proxy, lambda: twice.release(releases[twice]))
    assert await twice.release(releases[twice]) == 0  # LeaseBook.send_releases sends again
    a, b = await same_state(direct)
    assert a == b
    assert await once.ack(leases[once]) == (3, 0)
    await lost(proxy, lambda: twice.ack(leases[twice], call="acks"))
    # The write loop sends the batch again under its call id: the first reply.
    assert await twice.ack(leases[twice], call="acks") == (3, 0)
    a, b = await same_state(direct)
    assert a == b
    assert (await twice.counters())["done"] == 3


async def test_a_claim_whose_reply_was_lost_costs_a_lease_that_expires(
    proxy: TcpProxy, direct: Redis
) -> None:
    """A claim is never sent again as such; the claim loop claims anew. The
    leases of the lost reply hold their hosts until they expire; reclaimed,
    their URLs are claimed again: nothing is lost."""
    client = redis_client(proxy.redis_url)
    f = RedisFrontier(client, CrawlKeys("c", 2), 0, 1, 300)
    await f.prepare()
    assert await claim_every_shard(f) == []  # loads the script: the lost reply is its run's
    await f.add([entry(u) for u in URLS])
    await lost(proxy, lambda: f.claim(0, 100, "w1"))
    await lost(proxy, lambda: f.claim(1, 100, "w1"))
    assert (await f.counters())["leased"] == 3  # one per host, held by nobody
    reclaimed = 0
    while reclaimed < 3:
        reclaimed += sum([(await f.reclaim(s))[0] for s in range(2)])
    claimed: list[str] = []
    while len(claimed) < len(URLS):
        for shard in range(2):
            batch = await f.claim(shard, 100, "w1")
            claimed += [CODEC.decode(data, None).url for _, data in batch.items]
            for lease, _ in batch.items:
                await f.release([Release(lease, 0)])
                await f.ack([lease])
    assert sorted(claimed) == sorted(URLS)
    counters = await f.counters()
    assert counters["done"] == len(URLS) and counters["reclaimed"] == 3
    await client.aclose()


async def test_an_address_place_taken_and_released_again_counts_once(
    pair: Pair, proxy: TcpProxy, direct: Redis
) -> None:
    """address_take sent again finds its token's place held: granted again,
    nothing counted, queued or delayed twice (it used to find the address
    full, its own place taking it, and make its host wait). address_release
    sent again (the gate keeps a failed batch for its next send) moves the
    address's 429 penalty once (it used to double it again)."""
    asks, clients = {}, {}
    for f in pair:
        clients[f] = AddressClient(f.redis, f.keys, TIMING)
        for shard in range(f.keys.shards):  # loads the scripts: the lost replies are runs'
            await clients[f].release([PlaceRelease(f"{shard}:0", "198.51.100.9", 1)])
        asks[f] = [PlaceAsk(Lease(0, 1), "a.test", ADDRESS, 1)]
    once, twice = pair
    assert (await clients[once].take(asks[once]))[0] == [0]
    await lost(proxy, lambda: clients[twice].take(asks[twice]))
    assert (await clients[twice].take(asks[twice]))[0] == [0]
    a, b = await same_state(direct)
    assert a == b
    throttled = [PlaceRelease(Lease(0, 1).token, ADDRESS, 1, fetch_ms=10, flags=1)]
    await clients[once].release(throttled)
    await lost(proxy, lambda: clients[twice].release(throttled))
    await clients[twice].release(throttled)
    a, b = await same_state(direct)
    assert a == b
    state = await direct.hgetall(
        twice.keys.address_state(twice.keys.address_shard(ADDRESS), ADDRESS)
    )
    assert int(state[b"pen"]) == 1000


async def test_a_fleet_report_sent_again_counts_once(proxy: TcpProxy, direct: Redis) -> None:
    """A worker's report of its counters whose reply was lost (it ran) is sent
    again, under its call id, before the next report's increments: the fleet's
    ``stats`` and ``tp`` hold each increment once (its increments used to go
    again with the next report's: counted twice)."""
    client = redis_client(proxy.redis_url)
    keys = CrawlKeys("r", 2)
    fleet = FleetCounters(client, keys, "pages")
    await fleet.report({"pages": 1}, 10)  # loads the script: the lost reply is a run's
    await lost(proxy, lambda: fleet.report({"pages": 4, "other": 2}, 20))
    await fleet.report({"pages": 6, "other": 2}, 30)
    assert await direct.hgetall(keys.fleet_stats) == {b"pages": b"6", b"other": b"2"}
    assert await direct.hgetall(keys.throughput) == {b"10": b"1", b"20": b"3", b"30": b"2"}
    await client.aclose()


# -- the duplicate index's exact check --------------------------------------------------


def digest_of(text: str) -> bytes:
    return hashlib.sha1(text.encode()).digest()


async def test_a_lost_exact_check_is_not_sent_again(proxy: TcpProxy, direct: Redis) -> None:
    """Spread index, originals recorded (the default). The exact check
    (spread_exact.lua) whose reply was lost ran once and is not sent again:
    sent again it would find the page's own digest and judge the page a copy
    of itself; the caller gets a RedisError (the middleware keeps the page)
    and nothing after the check ran (no original, no tally)."""
    client = redis_client(proxy.redis_url)
    index = DedupeIndex(client, CrawlKeys("d", 2), k=3)
    url, host = "http://a.test/page", "a.test"
    first = await index.check_and_add(digest_of("other"), None, "http://a.test/o", host)
    assert first.kind is DedupeKind.NEW  # the scripts loaded: a lost reply is a run's
    assert index.spread is not None
    layout = index.spread.spread
    part, _, _ = layout.exact_part(digest_of("body"))
    state = layout.prefix(EXACT, part) + "st"
    before = int(await direct.hget(state, "n") or 0)
    proxy.drop_next_reply(b"EVALSHA")  # no SimHash: the exact check is the first script
    with pytest.raises(RedisError):
        await index.check_and_add(digest_of("body"), None, url, host)
    assert proxy.dropped == 1
    assert int(await direct.hget(state, "n") or 0) == before + 1  # ran once
    assert (await index_figures(direct, index.keys))["pages"] == 1  # not tallied
    # Its digest is in, its URL never recorded: a copy finds a body no URL
    # names (as after a worker killed there) and, after waiting for a URL,
    # is kept as new, its own URL recorded: a later copy names it.
    copy = await index.check_and_add(digest_of("body"), None, "http://a.test/copy", host)
    assert (copy.kind, copy.unrecorded) == (DedupeKind.NEW, True)
    later = await index.check_and_add(digest_of("body"), None, "http://a.test/later", host)
    assert (later.kind, later.original) == (DedupeKind.EXACT, "http://a.test/copy")
    await client.aclose()
