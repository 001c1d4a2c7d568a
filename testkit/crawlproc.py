"""Run ``scrapy crawl web`` workers as real subprocesses (one Redis frontier, many workers)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from testkit import REPO_ROOT

LOOPBACK_ALLOW = "127.0.0.0/8"  # CRAWL_GUARD_ALLOW for a crawl of a loopback test web


class WorkerProcess(subprocess.Popen[bytes]):
    """A crawl worker; its stdout and stderr (Scrapy's log) go to ``log_path``."""

    log_path: Path


def setting_value(value: object) -> str:
    """A ``-s NAME=VALUE`` string Scrapy's ``Settings.get*`` parse back."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value)  # getdict() loads JSON strings
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))  # getlist() splits on commas
    return str(value)  # bool -> "True"/"False": getbool() accepts both


def start_worker(
    cwd_repo_root: str | Path,
    redis_url: str | None,
    crawl: str | None,
    seeds: Sequence[str],
    extra_settings: Mapping[str, object] | None,
    log_path: str | Path,
    extra_args: Sequence[str] = (),
    spider: str = "web",
    env: Mapping[str, str] | None = None,
    python: str | Path | None = None,
) -> WorkerProcess:
    """Start one worker of crawl ``crawl``; the repo root holds scrapy.cfg.
    ``crawl`` None: no ``-a crawl=`` (the crawl the project names by default);
    no ``seeds``: no ``-a seeds=`` (a spider with its own start URLs).
    ``redis_url`` None: no REDIS_URL setting (the environment's, REDIS_HOST or
    the embedded Redis); ``env``: extra environment variables; ``python``: the
    interpreter (default this one; bench/plain_venv.py's runs pip's Scrapy alone)."""
    root = Path(cwd_repo_root).resolve()
    cmd = [str(python or sys.executable), "-m", "scrapy", "crawl", spider]
    if crawl is not None:
        cmd += ["-a", f"crawl={crawl}"]
    if seeds:
        cmd += ["-a", "seeds=" + ",".join(seeds)]
    if redis_url is not None:
        cmd += ["-s", f"REDIS_URL={redis_url}"]
    settings = dict(extra_settings or {})
    # Local crawl data (WARC spool and bodies) beside the log, not in the checkout.
    settings.setdefault("CRAWL_DATA_DIR", str(Path(log_path).resolve().parent / "crawl-data"))
    # The test webs listen on loopback, which the private-address guard refuses
    # by default; a test of the guard passes its own (an empty list: none).
    settings.setdefault("CRAWL_GUARD_ALLOW", LOOPBACK_ALLOW)
    for name, value in settings.items():
        cmd += ["-s", f"{name}={setting_value(value)}"]
    cmd += list(extra_args)
    pythonpath = [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
    environ = {**os.environ, **(env or {})}
    environ.update(PYTHONPATH=os.pathsep.join(pythonpath), PYTHONUNBUFFERED="1")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as out:  # the child keeps its own copy of the fd
        proc = WorkerProcess(
            cmd,
            cwd=root,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    proc.log_path = log_path
    return proc


def wait_until(predicate: Callable[[], bool], timeout: float = 60) -> None:
    """Polls ``predicate`` every 10 ms; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def stats_of(path: str | Path) -> dict[str, int]:
    """Integer stats from the dump Scrapy logs when a worker closes."""
    text = Path(path).read_text(errors="replace")
    return {k: int(v) for k, v in re.findall(r"'([\w/.-]+)': (\d+)[,}]?\n", text)}


def tail(path: str | Path, lines: int = 40) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        return f"<no log: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def _tails(procs: Sequence[WorkerProcess], lines: int) -> str:
    return "\n".join(
        f"--- worker pid {p.pid} rc={p.returncode} log {p.log_path}:\n{tail(p.log_path, lines)}"
        for p in procs
    )


def stop_worker(proc: WorkerProcess, sig: int = signal.SIGTERM) -> None:
    """Signal a worker: SIGTERM once is Scrapy's graceful shutdown, SIGKILL a crash."""
    if proc.poll() is None:
        proc.send_signal(sig)


def wait_all(
    procs: Sequence[WorkerProcess], timeout: float, check: bool = True, tail_lines: int = 40
) -> list[int]:
    """Wait for every worker; return their exit codes.

    On timeout, kill the ones still running and raise TimeoutError with the tail
    of every log; with ``check``, raise RuntimeError if any exited non-zero.
    """
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            break
    running = [p for p in procs if p.poll() is None]
    for proc in running:
        proc.kill()
        proc.wait()
    if running:
        pids = [p.pid for p in running]
        raise TimeoutError(
            f"workers {pids} still running after {timeout}s\n{_tails(procs, tail_lines)}"
        )
    codes = [p.returncode for p in procs]
    if check and any(codes):
        raise RuntimeError(f"worker exit codes {codes}\n{_tails(procs, tail_lines)}")
    return codes


def crawl_status(redis_url: str, crawl: str) -> dict[str, Any]:
    """``crawlproject status --json`` of a crawl, as a dict."""
    out = subprocess.run(
        [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", crawl,
         "status", "--json"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    return dict(json.loads(out))
