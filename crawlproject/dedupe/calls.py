"""The spread duplicate index's round trips: calls (a script, or a plain
command) sent in one pipeline. On one server one pipeline; on a Redis Cluster
each node gets its calls at once (EVALSHA sent as a raw command: its named
method is refused in a cluster pipeline).

A changing cluster answers some calls with refusals of a command that did not
run (``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``, ``NOSCRIPT``, a
promoted master under ``min-replicas-to-write``): only those calls are sent
again, with back-off, for up to the client's outage bound
(``CRAWL_REDIS_OUTAGE_SECONDS``), then the refusal is raised. A call that may
have run (a connection lost after it was sent) is sent again only if doing so
cannot apply it twice
(:attr:`Call.resend`: a read, or a script that applies once however often it
is sent); any other is an error. Whatever fails leaves as a RedisError, so
the callers that keep a page when Redis fails keep it.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ClusterDownError, MovedError, NoScriptError
from redis.exceptions import ConnectionError as RedisConnectionError

from crawlproject.lua import Prelude
from crawlproject.lua import load_script as lua_script
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
    register_script,
    reload_script,
    send_once,
)

logger = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 5.0
_warned_at = 0.0

# Refusals met on every slot move or failover, answered at once: not warned of.
ROUTINE = (MovedError, NoScriptError)


# The helpers of this package's scripts, each written once (lua/_prelude.lua:
# the Hamming distance, a bucket's split): prepended to each, the parts it uses.
INDEX_PRELUDE: Prelude = ("crawlproject.dedupe", "_prelude")


def load_script(redis: Redis, name: str) -> AsyncScript:
    """``lua/<name>.lua`` of this package, after what it uses of _prelude.lua."""
    return register_script(redis, lua_script("crawlproject.dedupe", name, INDEX_PRELUDE))


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


async def send_calls(redis: Redis, calls: Sequence[Call], raise_errors: bool = True) -> list[Any]:
    """The calls in one pipeline, replies in order. A call refused before it
    ran is sent again, alone with the others refused, with back-off, for up
    to the client's outage bound; a call that may have run, only if it is
    :attr:`Call.resend`. A call still failing after that: its error (a
    RedisError) is raised, or with ``raise_errors`` False, is its reply."""
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
            _warn(noted[0], len(again), bound)
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
