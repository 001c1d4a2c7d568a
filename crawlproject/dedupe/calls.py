"""The spread duplicate index's round trips: calls (a script, or a plain
command) sent in one pipeline. On one server one pipeline; on a Redis Cluster
each node gets its calls at once (EVALSHA sent as a raw command: its named
method is refused in a cluster pipeline).

A changing cluster answers some calls with refusals of a command that did not
run (``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``, ``NOSCRIPT``, a
promoted master under ``min-replicas-to-write``): only those calls are sent
again, with back-off, for up to the client's outage bound
(``CRAWL_REDIS_OUTAGE_SECONDS``, outage.py), then the refusal is raised. A call
that may have run (a connection lost after it was sent, redis-py dropping a
connection under it) is sent again only if doing so cannot apply it twice
(:attr:`Call.resend`: a read, or a script that applies once however often it
is sent); any other is an error. Whatever fails leaves as a RedisError, so
the callers that keep a page when Redis fails keep it.

redis-py's own cluster pipeline retry is not used: on a connection error it
closes every connection of the client (which other tasks were writing to:
"'NoneType' object has no attribute 'writelines'") and sends again every call
not yet answered, including calls whose connection it has just closed under
them, which may have run: an exact check sent twice would find its own
digest and judge the page a copy of itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MovedError,
    NoScriptError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from crawlproject.frontier.connection.outage import (
    FIRST_DELAY_SECONDS,
    MAX_DELAY_SECONDS,
    NOT_RUN,
    OUTAGE_ERRORS,
    REFUSED_BEFORE_RUNNING,
    SEND_FRAMES,
    WARN_EVERY_SECONDS,
    as_redis_error,
    redis_py_frame,
)

logger = logging.getLogger(__name__)

# The outage bound of a client that carries none (a plain Redis client):
# CRAWL_REDIS_OUTAGE_SECONDS's default.
DEFAULT_OUTAGE_SECONDS = 60.0
_warned_at = 0.0
# Where redis-py opens a connection: an error raised there wrote nothing.
CONNECT_FRAMES = frozenset({"connect_check_health"})


# Refusals met on every slot move or failover, answered at once: not warned of.
ROUTINE = (MovedError, NoScriptError)


def load_script(redis: Redis, name: str) -> AsyncScript:
    text = (resources.files("crawlproject.dedupe") / "lua" / f"{name}.lua").read_text()
    return redis.register_script(text)


@dataclass
class Call:
    """One command of a round trip: a script (EVALSHA) or a plain command."""

    script: AsyncScript | None
    keys: list[str]
    args: list[Any]
    command: str = ""  # a plain command (script None): HSETNX, HGET
    # Safe to send again when it may have run: a read, or a write that applies
    # once however often it is sent (HSETNX of one value, spread_add, spread_split).
    resend: bool = False

    def command_args(self) -> list[Any]:
        if self.script is None:
            return [self.command, *self.keys, *self.args]
        return ["EVALSHA", self.script.sha, len(self.keys), *self.keys, *self.args]


class NotSent(RedisError):
    """Nothing of the round trip was sent (the cluster's slots could not be
    read or mapped): no call ran."""


class MayHaveRun(RedisConnectionError):
    """The round trip failed after calls were sent: any call may have run."""


def did_not_run(reply: BaseException) -> bool:
    """A reply saying its command was refused before it ran."""
    if isinstance(reply, (*NOT_RUN, NotSent, BusyLoadingError, ReadOnlyError)):
        return True
    return isinstance(reply, ResponseError) and str(reply).startswith(REFUSED_BEFORE_RUNNING)


def _answered(reply: BaseException) -> bool:
    """An error that is the command's answer (a script's error): sending it
    again would answer the same."""
    return isinstance(reply, ResponseError) and not did_not_run(reply)


async def send_calls(redis: Redis, calls: Sequence[Call], raise_errors: bool = True) -> list[Any]:
    """The calls in one pipeline, replies in order. A call refused before it
    ran is sent again, alone with the others refused, with back-off, for up
    to the client's ``outage_seconds``; a call that may have run, only if it
    is :attr:`Call.resend`. A call still failing after that: its error (a
    RedisError) is raised, or with ``raise_errors`` False, is its reply."""
    bound = float(getattr(redis, "outage_seconds", DEFAULT_OUTAGE_SECONDS))
    replies: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    started: float | None = None
    delay = FIRST_DELAY_SECONDS
    while todo:
        got = await _round(redis, [calls[i] for i in todo])
        again: list[int] = []
        for i, reply in zip(todo, got, strict=True):
            replies[i] = reply
            if isinstance(reply, BaseException) and await _send_again(redis, calls[i], reply):
                again.append(i)
        now = time.monotonic()
        started = now if started is None else started
        if not again or now - started >= bound:
            break
        if noted := [replies[i] for i in again if not isinstance(replies[i], ROUTINE)]:
            _warn(noted[0], len(again), bound)
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_DELAY_SECONDS)
        todo = again
    for i, reply in enumerate(replies):
        if isinstance(reply, BaseException):
            error = as_redis_error(reply)
            if error is not reply:
                error.__cause__ = reply
            if raise_errors:
                raise error
            replies[i] = error
    return replies


async def _send_again(redis: Redis, call: Call, reply: BaseException) -> bool:
    """Whether a call answered ``reply`` (an error) is sent again; prepares
    its sending (a script loaded, the slot's new master noted)."""
    if isinstance(reply, AttributeError) and redis_py_frame(reply) is None:
        raise reply  # our own bug, not a connection redis-py dropped
    if isinstance(reply, NoScriptError) and call.script is not None:
        # A promoted replica, a restarted or flushed node: the script did not run.
        with contextlib.suppress(*OUTAGE_ERRORS):  # NOSCRIPT again: sent again within the bound
            await redis.script_load(call.script.script)
        return True
    if isinstance(reply, MovedError) and isinstance(redis, RedisCluster):
        await redis.nodes_manager.move_slot(reply)
    lost = isinstance(reply, ClusterDownError | NotSent | RedisConnectionError | OSError)
    if lost and isinstance(redis, RedisCluster):
        # As redis-py's own commands do: the cluster's slots are read again
        # before the next call (a failed master's replica may own them now).
        redis._initialize = True
    if did_not_run(reply):
        return True
    return call.resend and not _answered(reply)


async def _round(redis: Redis, calls: Sequence[Call]) -> list[Any]:
    """One pipeline of ``calls``: each call's reply or error. A failure of the
    whole pipeline is every call's error: NotSent if nothing was sent,
    MayHaveRun otherwise."""
    pipe = redis.pipeline(transaction=False)
    for call in calls:
        pipe.execute_command(*call.command_args())
    try:
        if isinstance(pipe, ClusterPipeline):
            return await _cluster_round(redis, pipe)
        return list(await pipe.execute(raise_on_error=False))
    except AttributeError as exc:
        where = redis_py_frame(exc)
        if where is None:
            raise
        if where in SEND_FRAMES and _one_connection(redis, calls):
            # The connection was dropped before the write: nothing was sent.
            return [NotSent(f"connection dropped under redis-py: {exc}")] * len(calls)
        return [_may_have_run(exc)] * len(calls)
    except OUTAGE_ERRORS as exc:
        if isinstance(exc, NotSent):
            return [exc] * len(calls)
        if redis_py_frame(exc) in CONNECT_FRAMES and _one_connection(redis, calls):
            # Its one connection could not be opened (a master killed -9):
            # nothing was written.
            return [NotSent(f"{type(exc).__name__}: {exc}")] * len(calls)
        if isinstance(exc, NOT_RUN):
            # Raised while mapping the calls to nodes, before any was sent.
            return [NotSent(f"{type(exc).__name__}: {exc}")] * len(calls)
        return [_may_have_run(exc)] * len(calls)


def _one_connection(redis: Redis, calls: Sequence[Call]) -> bool:
    """Whether the calls went over one connection, sent once: a cluster's
    calls of one slot (a plain pipeline is retried by redis-py: an earlier
    attempt may have been sent)."""
    if not isinstance(redis, RedisCluster):
        return False
    return len({redis.keyslot(call.keys[0]) for call in calls if call.keys}) <= 1


def _may_have_run(exc: BaseException) -> MayHaveRun:
    error = MayHaveRun(f"round trip failed after sending ({type(exc).__name__}: {exc})")
    error.__cause__ = exc
    return error


async def _cluster_round(redis: Redis, pipe: ClusterPipeline) -> list[Any]:
    """The cluster pipeline sent once, without redis-py's pipeline retry (see
    the module docstring) and without its redirections (sent again here, by
    the caller, with the others refused): each node gets its calls at once."""
    assert isinstance(redis, RedisCluster)
    try:
        await redis.initialize()  # the slots, read again if a failure asked for it
    except OUTAGE_ERRORS as exc:
        raise NotSent(f"cluster slots unreadable ({type(exc).__name__}: {exc})") from exc
    # redis-py 8.1 (requirements.txt pins 8.1.*): the strategy's one sending.
    strategy = pipe._execution_strategy
    try:
        return list(
            await strategy._execute(  # type: ignore[attr-defined]
                redis,
                strategy._command_queue,  # type: ignore[attr-defined]
                raise_on_error=False,
                allow_redirections=False,
            )
        )
    finally:
        await pipe.reset()


def _warn(reply: Any, calls: int, bound: float) -> None:
    global _warned_at
    now = time.monotonic()
    if now - _warned_at < WARN_EVERY_SECONDS:
        return
    _warned_at = now
    logger.warning(
        "Duplicate index: Redis answered %s (%s) to %d calls; sending them again for up to %.0f s",
        type(reply).__name__,
        reply,
        calls,
        bound,
    )
