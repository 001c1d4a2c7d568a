"""The frontier's Redis client from ``REDIS_URL``: one server, or a Redis Cluster.

``redis://`` / ``rediss://`` (TLS) / ``unix://`` URLs give a plain client;
``redis+cluster://host:port`` (or ``rediss+cluster://``) gives redis-py's
cluster client, which finds the other nodes itself. Every key the crawl uses
carries a hash tag (``cp:{crawl/s~n}:``, ``cp:{crawl/dd...}:``, ``cp:{crawl}:``:
crawlproject/frontier/store/keys.py), so each script touches one slot, and the
cluster client routes it by its first key; pipelines of several slots are
split by node (``transaction=False`` everywhere).

A plain client never resends a command on its own: redis-py's ``Redis(...)``
default ``Retry`` sends a command (a whole pipeline) again after a connection
error or timeout — a script that ran but whose reply was lost would run
twice. Plain clients here have ``Retry(NoBackoff(), 0)``: the error reaches
the caller (the scheduler's loops wait it out,
crawlproject/frontier/scrapy_glue/background_loops.py).
The cluster client still has redis-py's (see :func:`redis_client`): there the
scripts that write run once per call id (crawlproject/lua.py once_per_call),
a plain command may run twice. What the clients still ride through is what
certainly did not run (outage.py: a refused connection, ``CLUSTERDOWN``, a
slot moving; redis-py's own MOVED/ASK redirections, refused before running).
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from crawlproject.frontier.connection.outage import RideThroughCluster, RideThroughRedis
from crawlproject.redis_calls import (
    CONNECTION_ERRORS,
    make_send_aware,
    no_resend_options,
    outage_seconds,
)

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def cluster_node_url(url: str) -> str | None:
    """A cluster URL's node as a plain ``redis://``/``rediss://`` URL (what
    redis-py's cluster clients take); None if ``url`` is not a cluster URL."""
    scheme, _, rest = url.partition("://")
    plain = CLUSTER_SCHEMES.get(scheme.lower())
    return None if plain is None else f"{plain}://{rest}"


def redis_client(
    url: str,
    client_name: str | None = None,
    outage_seconds: float | None = None,
    retry_connections: bool = False,
) -> Redis:
    """A client of ``url`` (bytes replies). The cluster client offers the same
    commands, scripts and pipelines the frontier uses, so it is typed as one.

    A cluster client rides through a changing cluster for ``outage_seconds``
    (outage.py; default: the setting's default); with ``retry_connections``
    (the ``crawlproject`` commands) connection errors too. A plain client
    rides through what certainly did not run as well (a refused connection:
    a Redis restarting); a worker's loops wait out the rest."""
    retried = CONNECTION_ERRORS if retry_connections else ()
    node = cluster_node_url(url)
    client: RideThroughRedis | RideThroughCluster
    options = no_resend_options(client_name)
    if node is None:
        plain = RideThroughRedis.from_url(url, **options)
        client = cast(RideThroughRedis, plain)
    else:
        # The cluster client keeps redis-py's own retry for now: without it,
        # a call made while a slot migrates fails with "Connection closed by
        # server" when another task's MOVED makes redis-py close the client's
        # connections under it (tests/test_lua_declared_keys.py failed 4 of
        # 4), and nothing tells whether that call was sent. So a cluster
        # call whose reply was lost is sent again: a script that writes
        # answers its first run's reply (lua.py once_per_call), a plain
        # command runs twice (tests/test_lost_reply.py).
        options.pop("retry")
        cluster = RideThroughCluster.from_url(node, **options)
        client = cast(RideThroughCluster, cluster)
    client.retried, client.url_for_errors, client.warns = retried, url, not retry_connections
    make_send_aware(client)  # its errors say whether the command was sent (redis_calls.py)
    if outage_seconds is not None:
        client.outage_seconds = outage_seconds
    return cast(Redis, client)


def command_client(url: str) -> Redis:
    """A client of ``url`` for a ``crawlproject`` command: every error of
    a command that did not run and every connection error retried within the project's
    ``CRAWL_REDIS_OUTAGE_SECONDS``."""
    from scrapy.utils.project import get_project_settings

    return redis_client(
        url, outage_seconds=outage_seconds(get_project_settings()), retry_connections=True
    )
