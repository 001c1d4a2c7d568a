"""How the project talks to Redis (issue 42, item 2): what an error of a call
means and whether the call may be sent again, one back-off, the outage bound
(``CRAWL_REDIS_OUTAGE_SECONDS``, read once: :func:`outage_seconds`), one
NOSCRIPT path (:func:`reload_script`), and the parts of redis-py's cluster
client it leaves public but undocumented (``nodes_manager``, a node's
pipeline), used nowhere else. The clients riding through an outage with
these: crawlproject/frontier/connection/outage.py.

An error is told by its class, never by where in redis-py it was raised.
:class:`NothingSent` marks one raised before its command was written (marked
by :func:`make_send_aware` on redis-py's public connection methods). A command
that :func:`did_not_run` (refused before running: ``CLUSTERDOWN``,
``TRYAGAIN``, ``MOVED``/``ASK``, ``LOADING``...; or not sent) may be sent
again; any other error of a write may have run: sent again only if it applies
once however often it is sent (a read; a script under a call id, lua.py).
Counters run once per call id too (crawlproject/increments.py); the plain
writes left set absolute values (SET, HSET, ZADD of a time, SADD, DEL...) or
repeat harmlessly (``seed``'s LPUSH: the seen set admits a seed once; ``dead
--requeue``'s LREM).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    MaxConnectionsError,
    MovedError,
    NoScriptError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from scrapy.settings import BaseSettings

from crawlproject.default_settings.frontier import CRAWL_REDIS_OUTAGE_SECONDS
from crawlproject.lua import CALL_REPLY_MARGIN_SECONDS
from crawlproject.setting_values import ConfigError, crawl_setting

# -- the outage bound -----------------------------------------------------------------

OUTAGE_SETTING = "CRAWL_REDIS_OUTAGE_SECONDS"
DEFAULT_OUTAGE_SECONDS = float(CRAWL_REDIS_OUTAGE_SECONDS)  # of a client built without one


def outage_seconds(settings: BaseSettings) -> float:
    """``CRAWL_REDIS_OUTAGE_SECONDS``, refused (ConfigError) if not > 0."""
    value = float(crawl_setting(settings, OUTAGE_SETTING))
    if not value > 0:
        raise ConfigError(f"{OUTAGE_SETTING}={value!r}: must be a number of seconds > 0")
    return value


def outage_of(redis: object) -> float:
    """The outage bound ``redis`` was built with (the setting's default if none)."""
    return float(getattr(redis, "outage_seconds", DEFAULT_OUTAGE_SECONDS))


def call_reply_ms(redis: object) -> int:
    """How long ``redis``'s calls keep their replies (lua.py once_per_call):
    its outage bound and CALL_REPLY_MARGIN_SECONDS."""
    return int((outage_of(redis) + CALL_REPLY_MARGIN_SECONDS) * 1000)


# -- what an error means ----------------------------------------------------------------

# What a caller of Redis rides through: every Redis error, a slot no node
# covers (redis-py's RedisClusterException is no RedisError), a socket error
# that escaped redis-py.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (RedisError, RedisClusterException, OSError)
# Answers of a command the node refused before running it. ClusterError covers
# ClusterDownError and "TTL exhausted." (TRYAGAIN or MOVED/ASK to the end);
# MovedError is an AskError.
NOT_RUN: tuple[type[BaseException], ...] = (ClusterError, TryAgainError, AskError)
NOT_RUN += (RedisClusterException, BusyLoadingError, ReadOnlyError)
# Refusals before running that redis-py leaves plain ResponseErrors: a promoted
# master under min-replicas-to-write, a replica without its master.
REFUSED_BEFORE_RUNNING = ("NOREPLICAS", "MASTERDOWN")
_FAILED = (RedisConnectionError, RedisTimeoutError)  # a connection failed (subclasses: answers)
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (*_FAILED, OSError)


class NothingSent:
    """Marks an error raised before its command was written (see the module
    docstring): a class mixed into the error's own, which keeps its name."""


_SUBCLASSES: dict[tuple[type, type], type] = {}
E = TypeVar("E", bound=BaseException)


def _subclass(mixin: type, cls: Any) -> Any:
    """``cls``'s subclass of the same name that is also a ``mixin``."""
    if not issubclass(cls, mixin) and (mixin, cls) not in _SUBCLASSES:
        _SUBCLASSES[mixin, cls] = type(cls.__name__, (mixin, cls), {"__module__": cls.__module__})
    return cls if issubclass(cls, mixin) else _SUBCLASSES[mixin, cls]


def nothing_sent_class(cls: type[BaseException]) -> type[BaseException]:
    return _subclass(NothingSent, cls)  # type: ignore[no-any-return]


def mark_nothing_sent(exc: E) -> E:
    """``exc``, its class now also :class:`NothingSent`."""
    exc.__class__ = _subclass(NothingSent, type(exc))
    return exc


def nothing_sent(exc: BaseException) -> bool:
    """Whether ``exc`` was raised before its command was written."""
    # MaxConnectionsError: no connection of the node was free to write on.
    return isinstance(exc, NothingSent | MaxConnectionsError)


def did_not_run(exc: BaseException) -> bool:
    """Whether the command ``exc`` answers certainly did not run."""
    if isinstance(exc, NOT_RUN) or nothing_sent(exc):
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith(REFUSED_BEFORE_RUNNING)


def answered(exc: BaseException) -> bool:
    """An error that is the command's answer (a script's): resent, the same."""
    return isinstance(exc, ResponseError) and not did_not_run(exc)


def as_redis_error(exc: BaseException) -> RedisError:
    """``exc`` as a RedisError (itself if it is one)."""
    if isinstance(exc, RedisError):
        return exc
    if isinstance(exc, RedisClusterException):
        error: RedisError = ClusterDownError(f"{type(exc).__name__}: {exc}")
    else:
        error = RedisConnectionError(f"{type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


_ASKING = frozenset({"ASKING", b"ASKING"})


class SendAware:
    """Mixed before redis-py's connection class of a client: its errors say by
    their class whether the command was written (:class:`NothingSent`), and
    an AttributeError of a connection another task closed under redis-py
    (its writer gone: "'NoneType' object has no attribute 'writelines'") is
    a connection error. Only public methods of redis-py's connection."""

    asking = False  # the last command packed is an ASKING (cluster redirection)

    def pack_command(self, *args: Any) -> Any:
        self.asking = bool(args) and args[0] in _ASKING
        return super().pack_command(*args)  # type: ignore[misc]

    def pack_commands(self, commands: Any) -> Any:
        self.asking = False
        return super().pack_commands(commands)  # type: ignore[misc]

    async def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().connect_check_health(*args, **kwargs)  # type: ignore[misc]
        except _FAILED as exc:
            if type(exc) in _FAILED:
                mark_nothing_sent(exc)
            raise

    async def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().send_packed_command(*args, **kwargs)  # type: ignore[misc]
        except AttributeError as exc:
            lost = RedisConnectionError(f"connection dropped under redis-py: {exc}")
            raise mark_nothing_sent(lost) from exc
        except _FAILED as exc:
            if self.asking:  # the command after the ASKING was not sent
                mark_nothing_sent(exc)
            raise

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)  # type: ignore[misc]
        except AttributeError as exc:
            raise RedisConnectionError(f"connection dropped under redis-py: {exc}") from exc
        except _FAILED as exc:
            if self.asking:
                mark_nothing_sent(exc)
            raise


def no_resend_options(client_name: str | None = None) -> dict[str, Any]:
    """``from_url`` options of a client that never resends a command itself
    (redis-py's default ``Retry`` does: a script whose reply was lost would
    run twice); the caller, who knows whether it may, sends it again."""
    return {"client_name": client_name, "decode_responses": False, "retry": Retry(NoBackoff(), 0)}


def make_send_aware(redis: Redis | RedisCluster) -> None:
    """The connections ``redis`` opens from now on mark their errors (SendAware)."""
    if isinstance(redis, RedisCluster):
        # The dict every node of the client (those found later too) takes its
        # connection class from; the nodes given at the start already have one.
        kwargs = redis.get_connection_kwargs()
        connection_class = _subclass(SendAware, kwargs["connection_class"])
        kwargs["connection_class"] = connection_class
        for node in redis.startup_nodes:
            node.connection_class = connection_class
        return
    pool = redis.connection_pool
    pool.connection_class = _subclass(SendAware, pool.connection_class)


# -- one back-off -----------------------------------------------------------------------

FIRST_DELAY_SECONDS = 0.05
MAX_DELAY_SECONDS = 1.0  # a promoted replica serves within node timeout + ~1 s


class Backoff:
    """The waits of one outage: from FIRST_DELAY_SECONDS, doubling up to
    ``most``, never past ``bound`` seconds after the outage began."""

    def __init__(self, bound: float, most: float = MAX_DELAY_SECONDS) -> None:
        self.bound, self.most = bound, most
        self.reset()

    def reset(self) -> None:
        self.began: float | None = None
        self._next = FIRST_DELAY_SECONDS

    def failed(self, now: float, began: float | None = None) -> bool:
        """Notes a failure at ``now`` of an outage that began at ``began``
        (default: now, or this outage's first failure); whether there is time
        left within the bound."""
        began = now if began is None else began
        self.began = began if self.began is None else min(self.began, began)
        return now - self.began < self.bound

    def left(self, now: float) -> float:
        return self.bound - (0.0 if self.began is None else now - self.began)

    def delay(self, now: float) -> float:
        """The next wait (never past the bound); the one after is doubled."""
        wait = max(0.0, min(self._next, self.left(now)))
        self._next = min(self._next * 2, self.most)
        return wait


# -- scripts: one NOSCRIPT path -------------------------------------------------------

# Every script registered through register_script, by SHA1 (the same text has
# the same SHA in every client and on every server).
SCRIPTS: dict[str, str] = {}


def register_script(redis: Redis, text: str) -> AsyncScript:
    """``text`` registered on ``redis``, and known to :func:`reload_script`."""
    script = redis.register_script(text)
    note_script(script)
    return script


def note_script(script: AsyncScript) -> None:
    SCRIPTS[script.sha] = _text(script.script)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def reload_script(redis: Redis, sha: Any) -> bool:
    """After NOSCRIPT (a promoted replica, a restarted or flushed server: the
    script did not run): the script of ``sha`` loaded again (on a cluster, on
    every master). False if its text is unknown here."""
    text = SCRIPTS.get(_text(sha))
    if text is None:
        return False
    await redis.script_load(text)
    return True


def evalsha_args(sha: str, keys: str | Sequence[str], args: Sequence[Any]) -> list[Any]:
    keys = [keys] if isinstance(keys, str) else list(keys)
    return ["EVALSHA", sha, len(keys), *keys, *args]


async def evalsha_many(
    redis: Redis, calls: Sequence[tuple[str, str | Sequence[str], Sequence[Any]]]
) -> list[Any]:
    """EVALSHA ``(sha, keys, args)`` for each call (``keys``: one key or a
    list), replies in order, in one round trip on one server (a pipeline).
    On a cluster the calls go concurrently, each to its slot's node (the calls
    of one first key in order), each riding through as a command does. A call
    refused with NOSCRIPT is sent again alone once its script is loaded; the
    first error left is raised."""
    if isinstance(redis, RedisCluster):
        by_key: dict[str, list[int]] = {}
        for i, (_, keys, _) in enumerate(calls):
            by_key.setdefault(keys if isinstance(keys, str) else keys[0], []).append(i)
        replies: list[Any] = [None] * len(calls)

        async def run_key(indexes: list[int]) -> None:
            for i in indexes:
                replies[i] = await redis.execute_command(*evalsha_args(*calls[i]))

        await asyncio.gather(*(run_key(ix) for ix in by_key.values()))
        return replies
    replies = await _plain_pipeline(redis, [evalsha_args(*c) for c in calls])
    missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
    if missing and all([await reload_script(redis, s) for s in {calls[i][0] for i in missing}]):
        again = await _plain_pipeline(redis, [evalsha_args(*calls[i]) for i in missing])
        for i, reply in zip(missing, again, strict=True):
            replies[i] = reply
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply
    return replies


async def _plain_pipeline(redis: Redis, commands: Sequence[Sequence[Any]]) -> list[Any]:
    pipe = redis.pipeline(transaction=False)
    for args in commands:
        pipe.execute_command(*args)
    return list(await pipe.execute(raise_on_error=False))


# -- a cluster's nodes and slots (redis-py's nodes_manager: here only) -----------------


def node_of_key(redis: RedisCluster, key: str) -> str:
    """``key``'s node as ``redis`` last learned it (no round trip), or ""."""
    try:
        return str(redis.nodes_manager.get_node_from_slot(key_slot(key.encode())).name)
    except (KeyError, SlotNotCoveredError):
        return ""


async def note_moved(redis: Redis, exc: MovedError) -> None:
    """A MOVED answer: its slot's new node noted, as redis-py's commands do."""
    if isinstance(redis, RedisCluster):
        await redis.nodes_manager.move_slot(exc)


async def read_slots(redis: Redis) -> None:
    """The cluster's slots read again (a lost node's replica may serve them)."""
    if isinstance(redis, RedisCluster):
        await redis.nodes_manager.initialize()


async def send_once(redis: Redis, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
    """Each ``(key, command args)`` in one pipeline per node, sent once: no
    resend and no redirection by redis-py (a caller that knows which calls
    may be sent again does it). Each call's reply or error; a node's failure
    is the error of each of its calls (:class:`NothingSent` if nothing of
    them was written: on a client of no_resend_options, whose redis-py never
    sent an earlier try)."""
    if not isinstance(redis, RedisCluster):
        try:
            return await _plain_pipeline(redis, [args for _, args in calls])
        except OUTAGE_ERRORS as exc:
            return [exc] * len(calls)
    try:
        await redis.initialize()  # first use, or a failure of redis-py's own asked for it
        nodes: dict[str, tuple[ClusterNode, list[PipelineCommand]]] = {}
        for i, (key, args) in enumerate(calls):
            node = redis.get_node_from_key(key)
            assert node is not None
            nodes.setdefault(node.name, (node, []))[1].append(PipelineCommand(i, *args))
    except OUTAGE_ERRORS as exc:  # the slots unreadable or unmapped: nothing sent
        return [mark_nothing_sent(exc)] * len(calls)
    replies: list[Any] = [None] * len(calls)
    failures = await asyncio.gather(
        *(node.execute_pipeline(commands) for node, commands in nodes.values()),
        return_exceptions=True,
    )
    for (_, commands), failure in zip(nodes.values(), failures, strict=True):
        if isinstance(failure, AttributeError):  # redis-py's state changed under it (outage.py)
            failure = RedisConnectionError(f"redis-py's cluster state changed: {failure}")
        elif isinstance(failure, BaseException) and not isinstance(failure, OUTAGE_ERRORS):
            raise failure  # a bug, not Redis
        for command in commands:
            replies[command.position] = (
                failure if isinstance(failure, BaseException) else command.result
            )
    return replies
