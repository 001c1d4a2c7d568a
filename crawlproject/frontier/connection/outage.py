"""Riding through a Redis that is briefly away, and giving up past a bound.

A Redis Cluster changing under a running worker answers, for a few seconds,
with errors redis-py's cluster client gives up on: ``CLUSTERDOWN`` while a
failed master's replica is elected, ``TRYAGAIN`` (as ``ClusterError("TTL
exhausted.")``) and ``MOVED``/``ASK`` chains while a slot moves, a slot no
node covers (``SlotNotCoveredError``, not even a ``RedisError``), refused
connections to a master killed -9. A single Redis restarting gives connection
errors. Each is waited out with bounded back-off, and the bound is one setting,
``CRAWL_REDIS_OUTAGE_SECONDS``, shared by every Redis caller of a process:

* the cluster client (:class:`RideThroughCluster`) retries, inside each call,
  the errors of a command that certainly did not run (cluster down, slot not
  served or moving): every component (loops, address gate, robots store,
  dedupe index, status reporter, recrawl store) rides them through unchanged;
  it turns the errors that are not ``RedisError`` into one, so every
  ``except RedisError`` of the project sees them;
* every client (redis_client.py) rides through, the same way, a connection
  that could not be opened (nothing was sent: a Redis restarting, a master
  killed -9, an ``ASKING`` that failed); a plain client's own resends are
  off (``Retry(NoBackoff(), 0)``), the cluster client keeps redis-py's;
* the scheduler's loops (:class:`crawlproject.frontier.scrapy_glue.background_loops.Backoff`) wait
  out the rest (connection errors, where a command may have run: never
  resent blindly) and, past the bound, :func:`give_up`: one line, exit 1 at
  once. The worker's leases expire and their URLs return to the queues.
* ``crawlproject`` commands (:func:`redis_client.command_client`) retry connection errors
  too (a write whose reply was lost may be applied twice: a seed sent twice
  is found in the seen set), then exit 1 with one line (crawlproject/cli.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import sys
import time
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from scrapy.settings import BaseSettings

from crawlproject.setting_values import ConfigError, crawl_setting

logger = logging.getLogger(__name__)

OUTAGE_SETTING = "CRAWL_REDIS_OUTAGE_SECONDS"
# What a caller of Redis rides through: every Redis error, a slot no node
# covers (redis-py's RedisClusterException is no RedisError), a socket error
# that escaped redis-py.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (RedisError, RedisClusterException, OSError)
# Answers of a command that did not run (the node refused it before running
# it): resending cannot apply anything twice. ClusterError covers
# ClusterDownError and "TTL exhausted." (TRYAGAIN or MOVED/ASK to the end).
NOT_RUN: tuple[type[BaseException], ...] = (
    ClusterError,
    TryAgainError,
    AskError,
    RedisClusterException,
)
# Refusals of a command before it runs that a failover ends: a promoted master
# without a replica yet under min-replicas-to-write, a node still loading.
REFUSED_BEFORE_RUNNING = ("NOREPLICAS", "MASTERDOWN", "LOADING")
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
)
FIRST_DELAY_SECONDS = 0.05
MAX_DELAY_SECONDS = 1.0  # a promoted replica serves within node timeout + ~1 s
WARN_EVERY_SECONDS = 5.0
START_SECONDS = 5.0


def outage_seconds(settings: BaseSettings) -> float:
    """``CRAWL_REDIS_OUTAGE_SECONDS``, refused (ConfigError) if not > 0."""
    value = float(crawl_setting(settings, OUTAGE_SETTING))
    if not value > 0:
        raise ConfigError(f"{OUTAGE_SETTING}={value!r}: must be a number of seconds > 0")
    return value


def as_redis_error(exc: BaseException) -> RedisError:
    """``exc`` as a RedisError (itself if it is one)."""
    if isinstance(exc, RedisError):
        return exc
    if isinstance(exc, RedisClusterException):
        return ClusterDownError(f"{type(exc).__name__}: {exc}")
    return RedisConnectionError(f"{type(exc).__name__}: {exc}")


def outage_started(exc: BaseException, now: float) -> float:
    """When the outage ``exc`` ends began (time.monotonic): when the call
    first failed if the client rode it through (RideThrough), else ``now``."""
    started = getattr(exc, "outage_started", None)
    return started if isinstance(started, float) else now


def cause_of(exc: BaseException) -> str:
    """Why a connection failed, in a few words ("connection refused", "name
    or service not known"): the system error redis-py wraps, else its message."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, TimeoutError | RedisTimeoutError):
            return "timed out"
        if isinstance(cause, OSError) and (cause.strerror or cause.errno):
            # asyncio's refused connect carries errno 111 and "Connect call failed"
            errno = cause.errno
            text = os.strerror(errno) if errno is not None and errno > 0 else str(cause.strerror)
            return text[0].lower() + text[1:]
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__


def give_up(what: str, exc: BaseException, seconds: float) -> None:
    """Past the outage bound: one line, and the process exits 1 at once.

    Not a spider close: closing waits for requests in flight, which wait on
    Redis (politeness places, robots.txt), and would hang. Nothing is lost:
    this worker's leases expire and their URLs go back to the queues."""
    logger.critical(
        "Redis unusable for %.0f s (%s = %.0f) in frontier %s (%s: %s); exiting with "
        "status 1: this worker's leases expire and their URLs return to the queues",
        seconds,
        OUTAGE_SETTING,
        seconds,
        what,
        type(exc).__name__,
        exc,
    )
    _exit_now()


def leave(why: str) -> None:
    """One line, and the process exits 1 at once (see :func:`give_up`)."""
    logger.critical("Exiting with status 1: %s", why)
    _exit_now()


def _exit_now() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


# Scripts registered through a RideThrough client, by SHA1 (the same text has
# the same SHA in every client and on every server).
_SCRIPTS: dict[str, Any] = {}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def redis_py_frame(exc: BaseException) -> str | None:
    """The function of redis-py in which ``exc`` was raised, or None if it
    was raised elsewhere."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or f"{os.sep}redis{os.sep}" not in tb.tb_frame.f_code.co_filename:
        return None
    return tb.tb_frame.f_code.co_name


# Where redis-py writes a command out: an error there sent nothing.
SEND_FRAMES = frozenset({"_send_packed_command", "send_packed_command"})
# Where redis-py opens a connection (the socket's connect, TLS included):
# a connection error raised there sent nothing either (a refused connection,
# a Redis restarting, a master killed -9): resending cannot apply it twice.
CONNECT_FRAMES = frozenset({"connect_check_health"})


# What redis-py's cluster client sends on its own before a command: ASKING
# (after an ASK, on a pooled connection of the target). Its connection lost,
# the command itself was not sent.
BEFORE_COMMAND = frozenset({b"ASKING", "ASKING"})


def refused_before_sending(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection error raised before the command was
    sent (its connection could not be opened, or ASKING failed on it)."""
    if not isinstance(exc, CONNECTION_ERRORS):
        return False
    if redis_py_frame(exc) in CONNECT_FRAMES:
        return True
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "execute_command" and f"{os.sep}redis{os.sep}" in code.co_filename:
            args = tb.tb_frame.f_locals.get("args")
            if isinstance(args, tuple) and len(args) == 1 and args[0] in BEFORE_COMMAND:
                return True
        tb = tb.tb_next
    return False


def is_setup_error(exc: BaseException, url: str) -> bool:
    """A connection error that waiting cannot cure: the TLS handshake failed
    (certificate not trusted, client certificate refused, TLS to a plain port)
    or a certificate file of a ``rediss`` URL cannot be read. redis-py raises
    its ConnectionError with the original error as the cause or context. A
    lost connection (EOF, reset, refused) may be a Redis starting up: not this."""
    tls_url = url.split("://", 1)[0].lower().startswith("rediss")
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLError) and not isinstance(
            cause, ssl.SSLEOFError | ssl.SSLZeroReturnError
        ):
            return True
        if tls_url and isinstance(cause, FileNotFoundError | PermissionError | IsADirectoryError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


class _RideThrough:
    """``execute_command`` retried on the errors of ``retried`` until
    ``outage_seconds`` have passed since the first; errors that are no
    RedisError are raised as one."""

    outage_seconds: float = 60.0
    retried: tuple[type[BaseException], ...] = NOT_RUN
    url_for_errors: str = ""
    warns = True  # a worker's log says it waits; a command's one line is its error
    _warned_at: float = 0.0
    _start_said = False  # the start's wait said (say_start_wait)
    _answered = False  # until Redis first answers, a wrong URL fails fast

    def register_script(self, script: Any) -> Any:
        registered = super().register_script(script)  # type: ignore[misc]
        _SCRIPTS[registered.sha] = registered.script
        return registered

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        started: float | None = None
        # The bound counts from the call's start: a connect that hangs until
        # redis-py's connect timeout is part of the wait the log says.
        called = time.monotonic()
        delay = FIRST_DELAY_SECONDS
        reloaded = False
        while True:
            try:
                reply = await super().execute_command(*args, **kwargs)  # type: ignore[misc]
                self._answered = True
                return reply
            except NoScriptError:
                # A promoted replica, a restarted or flushed node: the script
                # did not run. Loaded again (on every master) and this call
                # alone resent: never the other calls of its batch, which ran.
                text = _SCRIPTS.get(_text(args[1])) if len(args) > 1 else None
                if reloaded or text is None or _text(args[0]).upper() != "EVALSHA":
                    raise
                reloaded = True
                await self.script_load(text)  # type: ignore[attr-defined]
            except AttributeError as exc:
                # redis-py's cluster client races with itself when a node dies:
                # one task drops a connection another is about to write to
                # ("'NoneType' object has no attribute 'writelines'"). Nothing
                # was sent then: resent. Any other AttributeError is a bug.
                where = redis_py_frame(exc)
                if where is None:
                    raise
                lost = RedisConnectionError(f"connection dropped under redis-py: {exc}")
                started = started or time.monotonic()
                if where not in SEND_FRAMES or time.monotonic() - started >= self._bound():
                    raise lost from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_DELAY_SECONDS)
            except OUTAGE_ERRORS as exc:
                now = time.monotonic()
                started = called if started is None else started
                if not self._retries(exc) or now - started >= self._bound():
                    error = as_redis_error(exc)
                    error.outage_started = started  # type: ignore[attr-defined]
                    if error is exc:
                        raise
                    raise error from exc
                if not self._answered:
                    self.say_start_wait(exc)
                elif self.warns and now - self._warned_at >= WARN_EVERY_SECONDS:
                    self._warned_at = now
                    logger.warning(
                        "Redis answered %s (%s) to %s; retrying for up to %.0f s",
                        type(exc).__name__,
                        exc,
                        args[0] if args else "?",
                        self._bound() - (now - started),
                    )
                # Never past the bound: the wait said is the wait done.
                await asyncio.sleep(min(delay, started + self._bound() - now))
                delay = min(delay * 2, MAX_DELAY_SECONDS)

    def _bound(self) -> float:
        """The outage bound; before Redis first answered, at most
        START_SECONDS (as a worker's start: a wrong URL, a Redis not started,
        is said at once)."""
        return self.outage_seconds if self._answered else min(self.outage_seconds, START_SECONDS)

    def start_bound(self) -> float:
        """How long a worker's start waits for Redis' first answer."""
        return min(self.outage_seconds, START_SECONDS)

    def say_start_wait(self, exc: BaseException) -> None:
        """Before Redis first answered: one line, once, saying how long the
        start waits for it (the wait that then happens: ``start_bound``)."""
        if self._answered or self._start_said or not self.warns:
            return
        self._start_said = True
        from crawlproject.security.redaction import redact

        logger.warning(
            "Redis at %s not reachable yet (%s); waiting up to %g s for it",
            redact(self.url_for_errors, []),
            cause_of(exc),
            self.start_bound(),
        )

    def _retries(self, exc: BaseException) -> bool:
        if is_setup_error(exc, self.url_for_errors):
            return False  # a TLS or certificate-file error: waiting cannot cure it
        if isinstance(exc, self.retried) or refused_before_sending(exc):
            return True
        return isinstance(exc, ResponseError) and str(exc).startswith(REFUSED_BEFORE_RUNNING)


def start_bound_of(redis: object) -> float:
    """How long a worker's start waits for ``redis``' first answer."""
    return redis.start_bound() if isinstance(redis, _RideThrough) else START_SECONDS


def say_start_wait(redis: object, exc: BaseException) -> None:
    """The start's one line about waiting for ``redis`` (once per client)."""
    if isinstance(redis, _RideThrough):
        redis.say_start_wait(exc)


class RideThroughPipeline(ClusterPipeline):
    """A cluster pipeline whose redis-py race of a dying node (see
    ``_RideThrough.execute_command``) is a connection error, which the
    callers' loops back off on and send again (a worker's maintenance read of
    the seen set's figures died of it: CI at 1291e18). Any other
    AttributeError is a bug, raised as it is."""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute(*args, **kwargs)
        except AttributeError as exc:
            if redis_py_frame(exc) is None:
                raise
            raise RedisConnectionError(f"connection dropped under redis-py: {exc}") from exc


class RideThroughCluster(_RideThrough, RedisCluster):  # type: ignore[misc]
    """redis-py's cluster client, riding through a cluster that changes."""

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> ClusterPipeline:
        if shard_hint:
            raise RedisClusterException("shard_hint is deprecated in cluster mode")
        return RideThroughPipeline(self, transaction)  # type: ignore[abstract]


class RideThroughRedis(_RideThrough, Redis):  # type: ignore[misc]
    """A plain client that retries (for ``crawlproject`` commands)."""
