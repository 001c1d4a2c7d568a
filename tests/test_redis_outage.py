"""A worker whose Redis stays away past CRAWL_REDIS_OUTAGE_SECONDS stops with
one line and exit status 1 at once (issue 35, item 3); the checks of a
cluster's settings at a worker's start, on ``CLUSTER NODES`` and ``CONFIG GET``
answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from crawlproject.frontier.connection.cluster_check import (
    config_gaps,
    masters_without_replica,
    warn_cluster_gaps,
)
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.redis_calls import evalsha_many, nothing_sent
from testkit.crawlproc import REPO_ROOT, start_worker, tail, wait_all, wait_until
from testkit.processes import free_port
from testkit.redis_cluster import RedisCluster
from testkit.redis_server import RedisServer
from testkit.tcp_proxy import TcpProxy
from testkit.testweb import TestWeb, page_counts

BOUND = 3.0


def test_a_redis_away_past_the_bound_ends_the_worker_with_status_1(
    redis_server_factory: Callable[..., RedisServer],
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
) -> None:
    server = redis_server_factory()
    web = testweb_factory(hosts=4, pages=200, latency_ms=(5, 20), links=3)
    settings = {"CRAWL_REDIS_OUTAGE_SECONDS": BOUND, "CRAWL_HOST_DELAY": 0.2}
    worker = start_worker(REPO_ROOT, server.url, "away", web.seeds, settings, tmp_path / "w.log")
    wait_until(lambda: len(page_counts(web.log)) >= 5, timeout=60)
    server.stop()
    stopped = time.monotonic()
    wait_all([worker], timeout=BOUND + 30, check=False)  # a hang: killed, TimeoutError
    waited = time.monotonic() - stopped
    log = worker.log_path.read_text(errors="replace")
    assert worker.returncode == 1, tail(worker.log_path, 60)
    lines = [ln for ln in log.splitlines() if "Redis unusable for" in ln]
    assert len(lines) == 1, lines
    assert "CRAWL_REDIS_OUTAGE_SECONDS" in lines[0] and "exiting with status 1" in lines[0]
    assert "Traceback" not in log and "Closing spider" not in log, tail(worker.log_path, 60)
    assert waited >= BOUND, waited  # it rode the outage through until the bound


NODES = """\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
a2 127.0.0.1:7002@17002 master - 0 0 2 connected 5461-10922
a3 127.0.0.1:7003@17003 master - 0 0 3 connected 10923-16383
b1 127.0.0.1:7004@17004 slave a1 0 0 1 connected
b2 127.0.0.1:7005@17005 slave a2 0 0 2 disconnected
b3 127.0.0.1:7006@17006 master,fail - 0 0 3 connected
"""


def test_masters_without_a_connected_replica_are_named() -> None:
    assert masters_without_replica(NODES) == ["127.0.0.1:7002", "127.0.0.1:7003"]


def test_a_masters_settings_are_checked() -> None:
    good = {"appendonly": "yes", "cluster-require-full-coverage": "no",
            "min-replicas-to-write": "1"}  # fmt: skip
    assert config_gaps(good) == []
    bad = {"appendonly": "no", "cluster-require-full-coverage": "yes",
           "min-replicas-to-write": "0"}  # fmt: skip
    gaps = config_gaps(bad)
    assert len(gaps) == 3
    assert [g.split(" ")[0] for g in gaps] == [
        "appendonly", "cluster-require-full-coverage", "min-replicas-to-write"
    ]  # fmt: skip


@pytest.fixture(scope="module")
def bare_cluster() -> Iterator[RedisCluster]:
    cluster = RedisCluster().start()  # 3 masters, no replica, Redis's defaults
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_worker_warns_of_what_its_cluster_lacks(bare_cluster: RedisCluster) -> None:
    async def check() -> list[str]:
        client = redis_client(bare_cluster.url)
        try:
            return await warn_cluster_gaps(client)
        finally:
            await client.aclose()

    warnings = asyncio.run(check())
    assert len(warnings) == 4, warnings
    assert "have no replica" in warnings[0]
    assert {w.split(" lack ")[1].split(" ")[0] for w in warnings[1:]} == {
        "appendonly", "cluster-require-full-coverage", "min-replicas-to-write"
    }  # fmt: skip


def test_a_master_without_the_scripts_runs_each_call_of_a_batch_once(
    bare_cluster: RedisCluster,
) -> None:
    # As a promoted replica: one master's script cache is empty. Of a batch
    # spread over the masters, only the calls it refused are sent again.
    keys = [f"{{t{i}}}:n" for i in range(12)]

    async def run() -> list[int]:
        client = redis_client(bare_cluster.url)
        try:
            incr = client.register_script("return redis.call('INCR', KEYS[1])")
            await incr(keys=[keys[0]], args=[])
            bare_cluster.command(
                bare_cluster.master_of_slot(key_slot(keys[1].encode())), "script", "flush"
            )
            replies = await evalsha_many(client, [(incr.sha, k, []) for k in keys])
            return [int(r) for r in replies]
        finally:
            await client.aclose()

    assert asyncio.run(run()) == [2] + [1] * 11


def test_a_connection_dropped_under_redis_py_is_told_from_a_bug(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    # redis-py's cluster client, when a node dies, can close a connection
    # another task is about to write on: redis-py meets no writer. Provoked
    # on a worker's client: a connection error that sent nothing (the INCR
    # did not run). An AttributeError of ours (a response callback) stays one.
    server = redis_server_factory()

    async def run() -> tuple[BaseException | None, object, BaseException | None]:
        client = redis_client(server.url)
        try:
            await client.ping()
            connection = await client.connection_pool.get_connection()
            sent: object
            sent, _ = await asyncio.gather(
                connection.send_packed_command(connection.pack_command("INCR", "k")),
                connection.disconnect(nowait=True),
                return_exceptions=True,
            )
            await client.connection_pool.release(connection)
            counter = await client.get("k")
            client.set_response_callback("GET", lambda reply, **_: reply.no_such_attribute)
            bug: BaseException | None = None
            try:
                await client.get("k")
            except AttributeError as exc:
                bug = exc
            return (sent if isinstance(sent, BaseException) else None), counter, bug
        finally:
            await client.aclose()

    dropped, counter, bug = asyncio.run(run())
    assert isinstance(dropped, RedisConnectionError) and nothing_sent(dropped), repr(dropped)
    assert counter is None  # nothing ran
    assert isinstance(bug, AttributeError) and "no_such_attribute" in str(bug)


def test_a_call_whose_connection_is_refused_rides_through_and_runs_once(
    redis_server_factory: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    # The network to Redis cut (new connections refused), then back: a
    # worker's call made meanwhile waits (nothing was sent) and runs once.
    server = redis_server_factory()

    async def run(proxy: TcpProxy) -> tuple[int, bytes | None]:
        client = redis_client(proxy.redis_url, outage_seconds=30)
        try:
            assert await client.incr("k") == 1
            proxy.cut()
            await client.connection_pool.disconnect()  # as after an error: a new connection
            waiting = asyncio.ensure_future(client.incr("k"))
            deadline = time.monotonic() + 20
            while "Redis answered ConnectionError" not in caplog.text:  # its refusal, waited out
                assert time.monotonic() < deadline and not waiting.done(), caplog.text
                await asyncio.sleep(0.02)
            proxy.restore()
            reply = await waiting
            return reply, await client.get("k")
        finally:
            await client.aclose()

    with TcpProxy("127.0.0.1", server.port) as proxy:
        reply, counter = asyncio.run(run(proxy))
    assert (reply, counter) == (2, b"2")  # answered, and ran once


def test_a_command_waits_for_a_redis_that_comes_back(tmp_path: Path) -> None:
    # `crawlproject status` started while its Redis restarts (a failover): a
    # listener that closes every connection stands in for it. The command
    # tries again (it connects again: the condition waited on), and answers
    # once Redis is back, no error line.
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))
    tries: list[int] = []

    def close_each() -> None:
        with contextlib.suppress(OSError):  # the listener shut down
            while True:
                connection, _ = listener.accept()
                tries.append(1)
                connection.close()

    threading.Thread(target=close_each, daemon=True).start()
    server = RedisServer()
    server.port = port
    url = f"redis://127.0.0.1:{port}/0"
    command = subprocess.Popen(
        [sys.executable, "-m", "crawlproject", "--redis-url", url, "--crawl", "back",
         "status", "--json"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: len(tries) >= 2 or command.poll() is not None, timeout=60)
        assert command.poll() is None  # tried again, still waiting for its Redis
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
        server.start()
        out, err = command.communicate(timeout=60)
    finally:
        command.kill()
        listener.close()
        server.stop()
    assert command.returncode == 0, err
    assert json.loads(out)["frontier"]["queued"] == 0
    assert "cannot use Redis" not in err


def test_a_failed_frontier_loop_closes_the_worker_with_status_1(
    redis_server_factory: Callable[..., RedisServer],
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
) -> None:
    # A loop that fails for a reason that is not Redis's closes the spider
    # (frontier_error, exit 1): from a task of its own, so the close, which
    # waits for the loops, does not wait for itself.
    server = redis_server_factory()
    web = testweb_factory(hosts=4, pages=200, latency_ms=(5, 20), links=3)
    settings = {
        "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
        "CRAWL_REDIS_OUTAGE_SECONDS": 20,
    }
    worker = start_worker(
        REPO_ROOT,
        server.url,
        "broken",
        web.seeds,
        settings,
        tmp_path / "w.log",
        spider="broken_loop",
    )
    wait_all([worker], timeout=60, check=False)  # a hang fails here (killed, TimeoutError)
    assert page_counts(web.log), "it broke mid-crawl, after fetching"
    log = worker.log_path.read_text(errors="replace")
    assert worker.returncode == 1, tail(worker.log_path, 60)
    assert log.count("Frontier task failed; closing the spider") == 1, tail(worker.log_path, 60)
    assert "Closing spider (frontier_error)" in log
    assert "Spider closed (frontier_error)" in log
