"""One way to talk to Redis (issue 42, item 2; crawlproject/redis_calls.py):
no code outside that module touches redis-py's private attributes or its
cluster client's ``nodes_manager``, nor reads traceback frames; the outage
bound is written once; and an error is told by its class, on errors provoked
against a real redis-server (a refused connect, a connection closed under
redis-py's write, a reply lost after the command ran)."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlproject.default_settings.frontier import CRAWL_REDIS_OUTAGE_SECONDS
from crawlproject.redis_calls import (
    Backoff,
    did_not_run,
    make_send_aware,
    nothing_sent,
)
from testkit.crawlproc import REPO_ROOT
from testkit.processes import free_port
from testkit.redis_server import RedisServer

REDIS_MODULE = Path("crawlproject/redis_calls.py")
# The project's own code (tests aside: they may look inside what they test).
CODE = ("crawlproject", "spiders", "middlewares", "pipelines", "testkit", "bench")
FRAMES = {"tb_frame", "tb_next", "f_locals", "f_code", "f_back"}


@cache  # parsed once for both tests
def _code_files() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple(
        (path.relative_to(REPO_ROOT), ast.parse(path.read_text(), str(path)))
        for top in CODE
        for path in sorted((REPO_ROOT / top).rglob("*.py"))
        if "results" not in path.relative_to(REPO_ROOT).parts  # bench's copies of old code
    )


@cache
def _redis_py_private_names() -> frozenset[str]:
    """Every ``_name`` (not a dunder) redis-py reads, writes or defines."""
    names: set[str] = set()
    for path in Path(redis.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "name", "")
            if isinstance(name, str) and name.startswith("_") and not name.startswith("__"):
                names.add(name)
    return frozenset(names)


def _own_names(trees: list[ast.Module]) -> set[str]:
    """The ``_names`` the project defines itself (its functions, classes and
    ``self._x`` attributes): reading them is no use of redis-py's."""
    own: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                own.add(node.attr)
    return own


def test_redis_py_internals_are_touched_in_one_module_only() -> None:
    files = list(_code_files())
    private = _redis_py_private_names() - _own_names([tree for _, tree in files])
    found = []
    for path, tree in files:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            if node.attr in private or node.attr in FRAMES:
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
            elif node.attr == "nodes_manager" and path != REDIS_MODULE:
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)} (only in {REDIS_MODULE})")
    assert not found, "\n".join(found)


def test_the_outage_bound_is_written_once() -> None:
    # The default's number given to a name about the outage (an assignment, a default, a
    # keyword) or as getattr(x, "outage_seconds", <number>).
    found = []
    for path, tree in _code_files():
        for node in ast.walk(tree):
            pairs: list[tuple[str, ast.AST | None]] = []
            if isinstance(node, ast.Assign):
                pairs = [(ast.unparse(t), node.value) for t in node.targets]
            elif isinstance(node, ast.AnnAssign):
                pairs = [(ast.unparse(node.target), node.value)]
            elif isinstance(node, ast.keyword):
                pairs = [(node.arg or "", node.value)]
            elif isinstance(node, ast.arguments):
                named = [*node.posonlyargs, *node.args][-len(node.defaults) or len(node.args) :]
                pairs = [(a.arg, d) for a, d in zip(named, node.defaults, strict=False)]
                pairs += [
                    (a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True)
                ]
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr":
                pairs = [(ast.unparse(node.args[1]), node.args[2])] if len(node.args) == 3 else []
            for name, value in pairs:
                if not isinstance(value, ast.Constant) or "outage" not in name.lower():
                    continue
                if value.value == CRAWL_REDIS_OUTAGE_SECONDS:
                    found.append(f"{path}:{value.lineno}: {name} = {ast.unparse(value)}")
    assert found == [
        "crawlproject/default_settings/frontier.py:14: CRAWL_REDIS_OUTAGE_SECONDS = 60.0"
    ], found


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
