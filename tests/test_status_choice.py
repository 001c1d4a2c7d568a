"""``crawlproject status`` as a user meets it: the crawl of their own spider
found without ``--crawl``, output cut by a closed pipe ending quietly, and
``--watch`` into a pipe (no terminal) printing every refresh."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from redis.crc import key_slot

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_cluster import RedisCluster
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb

FAST = {"CRAWL_HOST_DELAY": 0.1, "CRAWL_IDLE_CLOSE_SECONDS": 1, "CRAWL_IDLE_POLL_SECONDS": 0.1}
HINT = "crawlproject status --crawl NAME"
CLUSTER_CRAWLS = ("quotes", "books", "blog")


def command(redis_url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, *args]


def environment() -> dict[str, str]:
    """The test's environment without a crawl name or Redis of its own."""
    drop = ("CRAWL_NAME", "REDIS_URL", "REDIS_HOST", "REDIS_PORT")
    return {k: v for k, v in os.environ.items() if k not in drop}


def run(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command(redis_url, *args), cwd=REPO_ROOT, env=environment(),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", (args, done.returncode, done.stderr)
    return done


def crawl_named(
    name: str, redis_server: RedisServer, web: TestWeb, tmp_path: Path
) -> dict[str, int]:
    proc = start_worker(
        REPO_ROOT, redis_server.url, name, web.seeds, FAST, tmp_path / f"{name}.log"
    )
    wait_all([proc], timeout=120)
    return stats_of(proc.log_path)


def test_status_finds_the_only_crawl_or_lists_them(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=4, latency_ms=0, links=2, cross_links=0)
    url = redis_server.url
    # A spider named quotes crawls under its own name (crawl_name.py): here the
    # web spider told so, the same keys.
    pages = crawl_named("quotes", redis_server, web, tmp_path)["response_received_count"]
    assert pages > 0

    shown = json.loads(run(url, "status", "--json").stdout)
    assert shown["crawl"] == "quotes"
    assert shown["fleet"]["pages"] == pages
    assert shown["crawl_chosen"] == (
        f"crawl 'quotes', the only one in this Redis (crawl 'web' has nothing; {HINT} to choose)"
    )
    text = run(url, "status").stdout.splitlines()
    assert text[0] == shown["crawl_chosen"]
    assert text[1].strip() == "crawl quotes"  # the table's title
    # Named, a crawl is shown as asked, even an empty one.
    assert json.loads(run(url, "--crawl", "web", "status", "--json").stdout)["crawl"] == "web"

    crawl_named("books", redis_server, web, tmp_path)
    listing = json.loads(run(url, "status", "--json").stdout)
    assert listing == {"crawl": None, "crawls": ["books", "quotes"], "more": False, "hint": HINT}
    assert run(url, "status").stdout.splitlines() == [
        "crawl 'web' has nothing in this Redis; its crawls: books, quotes",
        f"choose one: {HINT}",
    ]
    assert json.loads(run(url, "--crawl", "books", "status", "--json").stdout)["crawl"] == "books"


def test_output_cut_by_a_closed_pipe_ends_quietly(redis_server: RedisServer) -> None:
    url = redis_server.url
    # A reader gone before the first write: every command that prints.
    for args in (["status"], ["status", "--json"], ["counts"], ["parked"], ["poisoned"],
                 ["recrawl", "--status"], ["dead"]):  # fmt: skip
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            proc = subprocess.run(
                command(url, *args), cwd=REPO_ROOT, env=environment(), stdout=write_end,
                stderr=subprocess.PIPE, text=True, timeout=60,
            )  # fmt: skip
        finally:
            os.close(write_end)
        # Python's own exit status on EPIPE (signal docs, "Note on SIGPIPE"), no word.
        assert (proc.returncode, proc.stderr) == (1, ""), args
    # `status --json --watch 0.2 | head -c 10`: head leaves after its bytes.
    for args in (["status", "--json", "--watch", "0.2"], ["status", "--watch", "0.2"]):
        status = subprocess.Popen(
            command(url, *args), cwd=REPO_ROOT, env=environment(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        head = subprocess.Popen(["head", "-c", "10"], stdin=status.stdout, stdout=subprocess.PIPE)
        assert status.stdout is not None and status.stderr is not None
        status.stdout.close()  # head holds the read end alone
        out, _ = head.communicate(timeout=60)
        assert len(out) == 10
        assert status.wait(timeout=60) == 1, args
        assert status.stderr.read() == b"", args


def lines_within(proc: subprocess.Popen[bytes], wanted: Callable[[list[str]], bool]) -> list[str]:
    """The lines ``proc`` printed, read until ``wanted`` says enough (60 s at most)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    data = b""
    deadline = time.monotonic() + 60
    while not wanted(data.decode().splitlines()):
        assert time.monotonic() < deadline, data.decode()[-2000:]
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, data.decode()[-2000:]  # it exited
            data += chunk
    return data.decode().splitlines()


def tables(lines: list[str]) -> int:
    return sum(line.strip() == "crawl web" for line in lines)  # each table's title


def json_lines(lines: list[str]) -> int:
    return sum(json.loads(line)["crawl"] == "web" for line in lines[:-1])  # the last: partial?


def test_watch_without_a_terminal_prints_every_refresh(redis_server: RedisServer) -> None:
    url = redis_server.url
    cases: list[tuple[list[str], Callable[[list[str]], int]]] = [
        (["--crawl", "web", "status", "--watch", "0.3"], tables),
        (["--crawl", "web", "status", "--json", "--watch", "0.3"], json_lines),
    ]
    for args, count in cases:
        proc = subprocess.Popen(
            command(url, *args), cwd=REPO_ROOT, env=environment(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            # Three refreshes while it runs (Live into a pipe printed only at the end).
            lines_within(proc, lambda lines: count(lines) >= 3)  # noqa: B023 (called here)
        finally:
            proc.send_signal(signal.SIGINT)  # ^C ends a watch with status 0
            # communicate, not wait: a watch blocked writing into a full pipe
            # never gets to its ^C (Popen.wait's own warning).
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0
            assert err == b"", args


def test_status_finds_the_crawls_on_every_master_of_a_cluster(
    testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=3, latency_ms=0, links=2, cross_links=0)
    cluster = RedisCluster().start()
    try:
        # Their cp:{NAME}:meta hash to slots of the three masters (0, 2, 1 of 3).
        thirds = {key_slot(f"cp:{{{n}}}:meta".encode()) * 3 // 16384 for n in CLUSTER_CRAWLS}
        assert thirds == {0, 1, 2}
        procs = [
            start_worker(REPO_ROOT, cluster.url, name, web.seeds, FAST, tmp_path / f"{name}.log")
            for name in CLUSTER_CRAWLS
        ]
        wait_all(procs, timeout=180)
        listing = json.loads(run(cluster.url, "status", "--json").stdout)
        assert listing["crawls"] == sorted(CLUSTER_CRAWLS), listing
    finally:
        cluster.stop()
