"""The embedded Redis of a data folder too deep for a unix socket's path.

A checkout (or ``CRAWL_DATA_DIR``) deep in the file system gave a socket path
over the 108 bytes Linux allows, and the worker refused to start: a user's first
``scrapy crawl`` on the embedded default failed for where their checkout lies.
The socket now goes to a folder of the user's own under the temp folder, named
by the data folder, so every worker of that folder finds the same server.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from crawlproject.frontier.connection.embedded import (
    MAX_UNIX_SOCKET_PATH,
    EmbeddedRedis,
    EmbeddedRedisError,
    socket_path_for,
)


def deep_folder(tmp_path: Path) -> Path:
    folder = tmp_path / ("d" * 60) / ("e" * 60)
    assert len(str(folder / "redis" / "redis.sock")) > MAX_UNIX_SOCKET_PATH
    return folder


async def test_a_deep_data_folder_gets_a_short_socket_shared_by_its_workers(
    tmp_path: Path,
) -> None:
    data = deep_folder(tmp_path)
    first, second = EmbeddedRedis(str(data)), EmbeddedRedis(str(data))
    assert first.socket_path == second.socket_path  # both workers find one server
    assert len(str(first.socket_path)) <= MAX_UNIX_SOCKET_PATH
    assert first.socket_path.parent.parent == Path(tempfile.gettempdir())
    a = await first.connect("crawlproject-worker:a")
    b = await second.connect("crawlproject-worker:b")
    try:
        await a.set("k", "v")
        assert await b.get("k") == b"v"  # one server
        folder = first.socket_path.parent.stat()
        assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.getuid()
        assert (data / "redis" / "redis.log").exists()  # its data stay in the data folder
    finally:
        await first.leave(a, "a")
        assert await second.leave(b, "b")  # the last one out stops it
    # Another data folder: another socket.
    assert socket_path_for(tmp_path / "other" / "redis") != first.socket_path


async def test_a_socket_folder_others_can_enter_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A temp folder of the test's own: other tests' servers share the real one.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    embedded = EmbeddedRedis(str(deep_folder(tmp_path)))
    folder = embedded.socket_path.parent
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o755)
    try:
        with pytest.raises(EmbeddedRedisError, match="is not this user's own folder"):
            await embedded.connect("crawlproject-worker:x")
    finally:
        folder.chmod(0o700)
