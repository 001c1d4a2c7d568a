"""Riding through a Redis that is briefly away, and giving up past a bound.

A Redis Cluster changing under a running worker answers, for a few seconds,
with errors redis-py's cluster client gives up on: ``CLUSTERDOWN`` while a
failed master's replica is elected, ``TRYAGAIN`` (as ``ClusterError("TTL
exhausted.")``) and ``MOVED``/``ASK`` chains while a slot moves, a slot no
node covers (``SlotNotCoveredError``, not even a ``RedisError``), refused
connections to a master killed -9. A single Redis restarting gives connection
errors. Each is waited out with bounded back-off, and the bound is one setting,
``CRAWL_REDIS_OUTAGE_SECONDS``, shared by every Redis caller of a process.
What an error means, the back-off and the bound are crawlproject/redis_calls.py's;
here, who waits for what:

* every client (:class:`RideThroughCluster`, :class:`RideThroughRedis`)
  retries, inside each call, the errors of a command that certainly did not
  run (redis_calls.did_not_run: cluster down, slot not served or moving, a
  connection that could not be opened, NOSCRIPT once its script is loaded):
  every component (loops, address gate, robots store, dedupe index, status
  reporter, recrawl store) rides them through unchanged; it turns the errors
  that are not ``RedisError`` into one, so every ``except RedisError`` of the
  project sees them. A plain client's own resends are off
  (``Retry(NoBackoff(), 0)``), the cluster client keeps redis-py's;
* the scheduler's loops (:class:`crawlproject.frontier.scrapy_glue.background_loops.Backoff`)
  wait out the rest (connection errors, where a command may have run: never
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
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisClusterException
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlproject.redis_calls import (
    DEFAULT_OUTAGE_SECONDS,
    OUTAGE_ERRORS,
    OUTAGE_SETTING,
    Backoff,
    as_redis_error,
    did_not_run,
    note_script,
    nothing_sent_class,
    reload_script,
)

logger = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 5.0
START_SECONDS = 5.0


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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _RideThrough:
    """``execute_command`` retried on the errors of a command that did not
    run (and of ``retried``) until ``outage_seconds`` have passed since the
    call began; errors that are no RedisError are raised as one."""

    outage_seconds: float = DEFAULT_OUTAGE_SECONDS
    retried: tuple[type[BaseException], ...] = ()  # a command's: connection errors too
    url_for_errors: str = ""
    warns = True  # a worker's log says it waits; a command's one line is its error
    _warned_at: float = 0.0
    _start_said = False  # the start's wait said (say_start_wait)
    _answered = False  # until Redis first answers, a wrong URL fails fast

    def register_script(self, script: Any) -> Any:
        registered = super().register_script(script)  # type: ignore[misc]
        note_script(registered)
        return registered

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        # The bound counts from the call's start: a connect that hangs until
        # redis-py's connect timeout is part of the wait the log says.
        called = time.monotonic()
        backoff = Backoff(self._bound())
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
                evalsha = len(args) > 1 and _text(args[0]).upper() == "EVALSHA"
                if reloaded or not evalsha or not await reload_script(self, args[1]):  # type: ignore[arg-type]
                    raise
                reloaded = True
            except AttributeError as exc:
                if not isinstance(self, RedisCluster):
                    raise  # a plain client's own: a bug
                raise _cluster_state_error(exc) from exc
            except OUTAGE_ERRORS as exc:
                now = time.monotonic()
                backoff.bound = self._bound()
                within = backoff.failed(now, began=called)  # since the call began, said
                if not self._retries(exc) or not within:
                    error = as_redis_error(exc)
                    error.outage_started = backoff.began  # type: ignore[attr-defined]
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
                        backoff.left(now),
                    )
                # Never past the bound: the wait said is the wait done.
                await asyncio.sleep(backoff.delay(now))

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
        return did_not_run(exc) or isinstance(exc, self.retried)


def start_bound_of(redis: object) -> float:
    """How long a worker's start waits for ``redis``' first answer."""
    return redis.start_bound() if isinstance(redis, _RideThrough) else START_SECONDS


def say_start_wait(redis: object, exc: BaseException) -> None:
    """The start's one line about waiting for ``redis`` (once per client)."""
    if isinstance(redis, _RideThrough):
        redis.say_start_wait(exc)


def _cluster_state_error(exc: AttributeError) -> RedisConnectionError:
    """redis-py's cluster client, a node dying, meets a node its own state
    dropped under it ("'NoneType' object has no attribute 'execute_command'",
    an ASK to a node it no longer knows): whether the command went out is
    unknown, so a connection error that may have run, which the callers'
    loops wait out (a connection another task closed under its write is
    told apart, as sending nothing, by the connection: redis_calls.SendAware)."""
    return RedisConnectionError(f"redis-py's cluster state changed under the call: {exc}")


class RideThroughPipeline(ClusterPipeline):
    """A cluster pipeline whose redis-py failure of a node dying (see
    :func:`_cluster_state_error`) is a connection error, which the callers'
    loops back off on (a worker's maintenance read of the seen set's figures
    died of it: CI at 1291e18). Any other error is raised as it is."""

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute(*args, **kwargs)
        except AttributeError as exc:
            raise _cluster_state_error(exc) from exc


class RideThroughCluster(_RideThrough, RedisCluster):  # type: ignore[misc]
    """redis-py's cluster client, riding through a cluster that changes."""

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> ClusterPipeline:
        if shard_hint:
            raise RedisClusterException("shard_hint is deprecated in cluster mode")
        return RideThroughPipeline(self, transaction)  # type: ignore[abstract]

    # redis-py resends, by exact class, a connection error of its own: also
    # when the connection marked it as sent nothing (redis_calls.SendAware).
    ERRORS_ALLOW_RETRY = (  # type: ignore[assignment]
        *RedisCluster.ERRORS_ALLOW_RETRY,
        *(nothing_sent_class(c) for c in RedisCluster.ERRORS_ALLOW_RETRY),
    )


class RideThroughRedis(_RideThrough, Redis):  # type: ignore[misc]
    """A plain client that retries (for ``crawlproject`` commands)."""
