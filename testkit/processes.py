"""Helpers for the real servers the tests start (redis-server, moto_server)."""

from __future__ import annotations

import socket
import subprocess

STOP_WAIT_SECONDS = 10


def free_port() -> int:
    """A TCP port free on loopback now (another process may take it before use)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], graceful: bool = True) -> None:
    """SIGTERM (or SIGKILL: a crash) and wait; SIGKILL if it outlives the wait."""
    if proc.poll() is not None:
        return
    if graceful:
        proc.terminate()
    else:
        proc.kill()
    try:
        proc.wait(STOP_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
