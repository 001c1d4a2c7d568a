"""One way to talk to Redis (issue 42, item 2; crawlproject/redis_calls.py):
an error is told by its class, on errors provoked against a real
redis-server (a refused connect, a connection closed under redis-py's
write, a reply lost after the command ran)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlproject.redis_calls import (
    Backoff,
    did_not_run,
    make_send_aware,
    nothing_sent,
)
from testkit.processes import free_port
from testkit.redis_server import RedisServer

# -- errors told by their class, provoked on a real redis-server ----------------------


@pytest.fixture
def server(redis_server_factory: Callable[..., RedisServer]) -> RedisServer:
    return redis_server_factory()


def _client(url: str, socket_timeout: float | None = None) -> Redis:
    client = Redis.from_url(url, retry=Retry(NoBackoff(), 0), socket_timeout=socket_timeout)
    make_send_aware(client)
    return client


def test_a_refused_connect_sent_nothing() -> None:
    async def run() -> BaseException:
        client = _client(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
        try:
            with pytest.raises(RedisConnectionError) as refused:
                await client.incr("k")
            return refused.value
        finally:
            await client.aclose()

    error = asyncio.run(run())
    assert type(error).__name__ == "ConnectionError" and isinstance(error, RedisConnectionError)
    assert nothing_sent(error) and did_not_run(error)


def test_a_connection_closed_under_redis_py_s_write_sent_nothing(server: RedisServer) -> None:
    # Another task closes the connection a command is about to be written on
    # (redis-py's cluster client does so when a node fails): redis-py meets
    # no writer ('NoneType' object has no attribute 'writelines').
    async def run(send_aware: bool) -> tuple[BaseException | None, object]:
        client = Redis.from_url(server.url, retry=Retry(NoBackoff(), 0), socket_timeout=5)
        if send_aware:
            make_send_aware(client)
        try:
            connection = await client.connection_pool.get_connection()
            sent: object
            sent, _ = await asyncio.gather(
                connection.send_packed_command(connection.pack_command("INCR", "k")),
                connection.disconnect(nowait=True),
                return_exceptions=True,
            )
            return (sent if isinstance(sent, BaseException) else None), await client.get("k")
        finally:
            await client.aclose()

    error, counter = asyncio.run(run(True))
    assert isinstance(error, RedisConnectionError) and nothing_sent(error), repr(error)
    assert counter is None  # nothing ran, as the class says
    bare, _ = asyncio.run(run(False))  # what the marking stands on: redis-py's own race
    assert isinstance(bare, AttributeError), repr(bare)


SLOW_INCR = """
redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local start = t[1] * 1e6 + t[2]
repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - start > 800000
"""


def test_a_reply_lost_after_the_command_ran_is_not_taken_for_nothing_sent(
    server: RedisServer,
) -> None:
    # A script that writes, then keeps the server busy past the client's
    # socket timeout: the write was sent and ran, its reply came too late.
    async def run() -> tuple[BaseException, object]:
        other = Redis.from_url(server.url)
        client = _client(server.url, socket_timeout=0.3)
        try:
            await client.ping()
            with pytest.raises(RedisTimeoutError) as lost:
                await client.eval(SLOW_INCR, 1, "k")
            return lost.value, await other.get("k")  # answered once the script ends
        finally:
            await client.aclose()
            await other.aclose()

    error, counter = asyncio.run(run())
    assert not nothing_sent(error) and not did_not_run(error), repr(error)
    assert counter == b"1"  # it ran: sending it again would apply it twice


def test_the_backoff_doubles_and_never_waits_past_the_bound() -> None:
    backoff = Backoff(bound=1.0, most=0.3)
    assert backoff.failed(now=100.0)
    assert [backoff.delay(100.0) for _ in range(4)] == [0.05, 0.1, 0.2, 0.3]
    assert backoff.delay(100.9) == pytest.approx(0.1)  # what is left of the bound
    assert not backoff.failed(now=101.0)
    backoff.reset()
    assert backoff.failed(now=200.0, began=199.5) and backoff.left(200.0) == 0.5
