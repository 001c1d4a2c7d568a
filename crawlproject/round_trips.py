"""Calls (a script, or a plain command) sent in one round trip, and the calls
a worker makes within a short window gathered into one (:class:`Gatherer`).
Used by the spread duplicate index (crawlproject/dedupe/calls.py) and the
index of stored payloads (crawlproject/store/revisits.py). On one server one
pipeline; on a Redis Cluster each node gets its calls at once (EVALSHA sent
as a raw command: its named method is refused in a cluster pipeline).

A changing cluster answers some calls with refusals of a command that did not
run (``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``, ``NOSCRIPT``, a
promoted master under ``min-replicas-to-write``): only those calls are sent
again, with back-off, for up to the client's outage bound
(``CRAWL_REDIS_OUTAGE_SECONDS``), then the refusal is raised. A call that may
have run (a connection lost after it was sent) is sent again only if doing so
cannot apply it twice (:attr:`Call.resend`: a read, or a script that applies
once however often it is sent); any other is an error. Whatever fails leaves
as a RedisError, so the callers that keep a page when Redis fails keep it.

redis-py's own cluster pipeline retry is not used: on a connection error it
closes every connection of the client (which other tasks were writing to:
"'NoneType' object has no attribute 'writelines'") and sends again every call
not yet answered, including calls whose connection it has just closed under
them, which may have run: an exact check sent twice would find its own
digest and judge the page a copy of itself. What an error means, the
back-off and the cluster's slots: crawlproject/redis_calls.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ClusterDownError, MovedError, NoScriptError
from redis.exceptions import ConnectionError as RedisConnectionError

from crawlproject.redis_calls import (
    CONNECTION_ERRORS,
    OUTAGE_ERRORS,
    Backoff,
    answered,
    as_redis_error,
    did_not_run,
    note_moved,
    nothing_sent,
    outage_of,
    read_slots,
    reload_script,
    send_once,
)

logger = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 5.0
_warned_at: dict[str, float] = {}

# Refusals met on every slot move or failover, answered at once: not warned of.
ROUTINE = (MovedError, NoScriptError)


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


class MayHaveRun(RedisConnectionError):
    """The round trip failed after calls were sent: any call may have run."""


async def send_calls(
    redis: Redis, calls: Sequence[Call], raise_errors: bool = True, what: str = "Redis"
) -> list[Any]:
    """The calls in one pipeline, replies in order. A call refused before it
    ran is sent again, alone with the others refused, with back-off, for up
    to the client's outage bound; a call that may have run, only if it is
    :attr:`Call.resend`. A call still failing after that: its error (a
    RedisError) is raised, or with ``raise_errors`` False, is its reply.
    ``what``: whose calls, in the warning of a resend."""
    bound = outage_of(redis)
    backoff = Backoff(bound)
    replies: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    while todo:
        got = await send_once(redis, [(calls[i].keys[0], calls[i].command_args()) for i in todo])
        again: list[int] = []
        lost = False
        for i, reply in zip(todo, got, strict=True):
            replies[i] = reply
            if isinstance(reply, BaseException):
                lost = lost or isinstance(reply, (ClusterDownError, *CONNECTION_ERRORS))
                if await _send_again(redis, calls[i], reply):
                    again.append(i)
        if not again or not backoff.failed(time.monotonic()):
            break
        if noted := [replies[i] for i in again if not isinstance(replies[i], ROUTINE)]:
            _warn(what, noted[0], len(again), bound)
        await asyncio.sleep(backoff.delay(time.monotonic()))
        if lost:
            # As redis-py's own commands do: the cluster's slots are read again
            # before the next call (a failed master's replica may own them now).
            with contextlib.suppress(*OUTAGE_ERRORS):
                await read_slots(redis)
        todo = again
    for i, reply in enumerate(replies):
        if isinstance(reply, BaseException):
            error = _may_have_run(reply) if _maybe_ran(reply) else as_redis_error(reply)
            if raise_errors:
                raise error
            replies[i] = error
    return replies


async def _send_again(redis: Redis, call: Call, reply: BaseException) -> bool:
    """Whether a call answered ``reply`` (an error) is sent again; prepares
    its sending (a script loaded, the slot's new master noted)."""
    if isinstance(reply, NoScriptError) and call.script is not None:
        # NOSCRIPT again: sent again within the bound.
        with contextlib.suppress(*OUTAGE_ERRORS):
            await reload_script(redis, call.script.sha)
        return True
    if isinstance(reply, MovedError):
        await note_moved(redis, reply)
    if did_not_run(reply):
        return True
    return call.resend and not answered(reply)


def _maybe_ran(reply: BaseException) -> bool:
    """A connection lost after the call was written: it may have run."""
    return isinstance(reply, CONNECTION_ERRORS) and not nothing_sent(reply)


def _may_have_run(exc: BaseException) -> MayHaveRun:
    error = MayHaveRun(f"round trip failed after sending ({type(exc).__name__}: {exc})")
    error.__cause__ = exc
    return error


def _warn(what: str, reply: Any, calls: int, bound: float) -> None:
    now = time.monotonic()
    if now - _warned_at.get(what, 0.0) < WARN_EVERY_SECONDS:
        return
    _warned_at[what] = now
    logger.warning(
        "%s: Redis answered %s (%s) to %d calls; sending them again for up to %.0f s",
        what,
        type(reply).__name__,
        reply,
        calls,
        bound,
    )


# -- gathering a window's calls ----------------------------------------------------------

A = TypeVar("A")
R = TypeVar("R")

# Calls made within this window go to Redis in one round trip.
WINDOW_SECONDS = 0.02
MAX_CALLS = 64


class Gatherer(Generic[A, R]):
    """Gathers the calls (``args``) made within ``window_seconds`` of the
    first into one ``send_many(list of args)``, whose replies (in order; an
    exception in a call's place is that call's error) answer each caller;
    ``max_calls`` pending are sent at once. An error of the whole send is
    each caller's. The window only delays the callers, in the order they
    called: the calls of one send run in that order."""

    def __init__(
        self,
        send_many: Callable[[list[A]], Awaitable[Sequence[R | BaseException]]],
        window_seconds: float = WINDOW_SECONDS,
        max_calls: int = MAX_CALLS,
    ) -> None:
        self.send_many = send_many
        self.window_seconds = window_seconds
        self.max_calls = max_calls
        self._pending: list[tuple[A, asyncio.Future[R]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def call(self, args: A) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((args, future))
        if len(self._pending) >= self.max_calls:
            self.flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.window_seconds, self.flush)
        return await future

    def flush(self) -> None:
        """Sends what is pending now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.ensure_future(self._send(batch))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[A, asyncio.Future[R]]]) -> None:
        try:
            replies = await self.send_many([args for args, _ in batch])
        except Exception as exc:  # each caller gets the error (RedisError: page kept)
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), reply in zip(batch, replies, strict=True):
            if future.done():
                continue
            if isinstance(reply, BaseException):
                future.set_exception(reply)
            else:
                future.set_result(reply)
