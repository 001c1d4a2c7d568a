"""A real ``moto_server`` (moto's S3 over HTTP) on a free loopback port, for tests.

The executable is the one next to ``sys.executable`` (the venv's bin), else
``moto_server`` from PATH; ``TEST_MOTO_SERVER`` picks one explicitly. Clients
reach it with boto3's ``endpoint_url=server.endpoint_url``.

moto keeps everything in memory: ``stop()`` loses every bucket and object, and
``start()`` again (same port, so clients built before keep working) begins
empty. An outage test therefore re-creates its bucket after the restart and
checks that what was written while the server was down gets written once it
is back, not that earlier objects survived.
"""

from __future__ import annotations

import http.client
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testkit.processes import free_port, stop_process

log = logging.getLogger(__name__)

# Credentials moto accepts (any are): tests never reach real AWS.
TEST_ACCESS_KEY_ID = "testing"
TEST_SECRET_ACCESS_KEY = "testing"
TEST_REGION = "us-east-1"
TEST_BUCKET = "crawl-bodies"  # the bucket of the tests' `moto` fixture (tests/conftest.py)


def find_moto_server() -> str:
    """Path of the moto_server executable to use (see the module docstring)."""
    if chosen := os.environ.get("TEST_MOTO_SERVER"):
        return chosen
    beside = Path(sys.executable).parent / "moto_server"
    if beside.exists():
        return str(beside)
    if found := shutil.which("moto_server"):
        return found
    raise RuntimeError("moto_server not found: pip install 'moto[server]'")


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
        try:
            conn.request("GET", "/moto-api/")  # any HTTP answer will do
            conn.getresponse().read()
            return True
        finally:
            conn.close()
    except OSError:
        return False


class MotoServer:
    """One moto_server process; ``stop()`` and ``start()`` again keep the port."""

    def __init__(self, executable: str | None = None) -> None:
        self.executable = executable or find_moto_server()
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        fd, name = tempfile.mkstemp(prefix="test-moto-", suffix=".log")
        os.close(fd)
        self.logfile = Path(name)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 20.0) -> MotoServer:
        # A port picked by bind(0) can be taken before moto binds it: retry.
        for _ in range(5):
            if self._launch(self.port or free_port(), timeout):
                log.info("moto_server on port %d", self.port)
                return self
            if self.port:  # a restart keeps its port: nothing else to try
                break
        raise RuntimeError(f"moto_server did not start:\n{self.log_tail()}")

    def _launch(self, port: int, timeout: float) -> bool:
        with open(self.logfile, "ab") as out:
            self.proc = subprocess.Popen(
                [self.executable, "-H", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if _answers(port):
                self.port = port
                return True
            time.sleep(0.02)
        self._terminate()
        return False

    def _terminate(self) -> None:
        if self.proc is None:
            return
        stop_process(self.proc)
        self.proc = None

    def stop(self) -> None:
        """Stop the server (its buckets and objects are gone); ``start()`` restarts it."""
        self._terminate()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client of this server (own session; test credentials)."""
        import boto3.session
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=TEST_REGION,
            aws_access_key_id=TEST_ACCESS_KEY_ID,
            aws_secret_access_key=TEST_SECRET_ACCESS_KEY,
            config=Config(**config) if config else None,
        )

    def request_count(self, method: str, path_part: str = "") -> int:
        """Requests with this method (and ``path_part`` in the path) in moto's access log."""
        needle = f'"{method} '
        return sum(
            1
            for line in self.log_tail(lines=1_000_000).splitlines()
            if needle in line and path_part in line
        )

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.logfile.unlink(missing_ok=True)
