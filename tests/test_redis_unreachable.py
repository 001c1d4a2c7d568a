"""A worker whose Redis cannot be reached: what its log says about the wait is
what happens, and its last line says where (the URL, redacted) and why."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from testkit.crawlproc import REPO_ROOT, start_worker, tail, wait_all, wait_until
from testkit.processes import free_port

FAST = {"CRAWL_IDLE_CLOSE_SECONDS": 1, "CRAWL_IDLE_POLL_SECONDS": 0.1}


def test_an_unreachable_redis_is_waited_for_as_said_then_named_last(tmp_path: Path) -> None:
    port = free_port()  # a closed port on loopback: every connection refused
    url = f"redis://user:s3cret@127.0.0.1:{port}/0"
    shown = f"redis://user:***@127.0.0.1:{port}/0"
    # name: (CRAWL_REDIS_OUTAGE_SECONDS, the wait it says and does): a start
    # waits at most 5 s (a wrong URL is said soon), less if the bound is less.
    cases = {"short": (2, 2), "default": (None, 5)}
    procs = {}
    for name, (outage, _) in cases.items():
        settings = dict(FAST) if outage is None else {**FAST, "CRAWL_REDIS_OUTAGE_SECONDS": outage}
        procs[name] = start_worker(
            REPO_ROOT, url, None, ["http://127.0.3.1:9/"], settings, tmp_path / f"{name}.log"
        )
    said_at: dict[str, float] = {}
    ended_at: dict[str, float] = {}

    def watch() -> bool:
        for name, proc in procs.items():
            text = proc.log_path.read_text(errors="replace")
            if name not in said_at and "not reachable yet" in text:
                said_at[name] = time.monotonic()
            if name not in ended_at and proc.poll() is not None:
                ended_at[name] = time.monotonic()
        return len(ended_at) == len(procs)

    wait_until(watch, timeout=120)
    assert wait_all(list(procs.values()), timeout=10, check=False) == [1, 1]
    for name, (_, wait) in cases.items():
        log = procs[name].log_path
        lines = log.read_text().splitlines()
        warned = [ln for ln in lines if "not reachable yet" in ln]
        assert len(warned) == 1, tail(log)
        assert warned[0].endswith(
            f"WARNING: Redis at {shown} not reachable yet (connection refused); "
            f"waiting up to {wait} s for it"
        ), warned
        # The last line: where and why, and the wait it did.
        assert lines[-1].endswith(
            f"ERROR: Cannot open the frontier (ConnectionError at {shown}): connection "
            f"refused, after waiting {wait} s (Error 111 connecting to 127.0.0.1:{port}. "
            f"Connect call failed ('127.0.0.1', {port}).)"
        ), tail(log)
        # It waited what it said (then closed the spider), not three times as long.
        assert wait - 0.5 <= ended_at[name] - said_at[name] <= wait + 8, (name, tail(log))
        text = log.read_text()
        assert "s3cret" not in text and "Traceback" not in text
        assert "retrying for up to" not in text  # the wait is said once, as it is


def test_a_redis_that_never_answers_a_connect_is_named_last_with_the_time_waited(
    tmp_path: Path,
) -> None:
    # A listener whose queue is full: the kernel drops further SYNs, so a
    # connect hangs (as to a firewalled host) until redis-py's connect timeout.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = []
    for _ in range(3):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
        queued.append(client)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        proc = start_worker(
            REPO_ROOT, url, None, ["http://127.0.3.1:9/"], FAST, tmp_path / "hung.log"
        )
        started = time.monotonic()
        assert wait_all([proc], timeout=120, check=False) == [1]
        elapsed = time.monotonic() - started
    finally:
        for sock in (*queued, listener):
            sock.close()
    lines = proc.log_path.read_text().splitlines()
    assert lines[-1].endswith(
        f"ERROR: Cannot open the frontier (TimeoutError at {url}): timed out, after waiting "
        "5 s (Timeout connecting to server)"
    ), tail(proc.log_path)
    assert elapsed < 5 + 30, tail(proc.log_path)  # the start, 5 s, the close: not minutes
