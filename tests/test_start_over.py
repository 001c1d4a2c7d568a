"""Starting a crawl over, and the lines a worker with nothing to do gets
(issue 41, items 4 and 5): ``crawlproject reset --crawl NAME``,
``SCHEDULER_FLUSH_ON_START = True`` (both refused while workers of the crawl
are alive), the one INFO line of a run that finds its crawl finished, the one
WARNING of a run with no seeds. Real redis-server, real workers, loopback web."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import redis

from testkit.crawlproc import REPO_ROOT, start_worker, stop_worker, wait_all, wait_until
from testkit.testweb import TestWeb, page_counts

FAST = {
    "CRAWL_HOST_DELAY": 0.05,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
}
SCHEDULER = "[crawlproject.frontier.scheduler]"
WORKERS_ALIVE = (
    "1 worker(s) of crawl 'busy' are alive (a heartbeat within the lease time): stop them "
    "first (Ctrl-C, SIGTERM), or wait for their crawl to end"
)


def finished_line(crawl: str, done: int) -> str:
    return (
        f"{SCHEDULER} INFO: Crawl {crawl!r} was already finished: {done} URL(s) done, none "
        "queued, and no seed of this run was new. To fetch again: crawlproject --crawl "
        f"{crawl} recrawl --all (the URLs tracked for recrawl); to start over: crawlproject "
        f"reset --crawl {crawl}, or -s SCHEDULER_FLUSH_ON_START=True; or crawl under another "
        "name (-a crawl=NAME)"
    )


def lines_with(log: str, text: str) -> list[str]:
    """The log's lines holding ``text``, without their timestamp."""
    return [re.sub(r"^\S+ \S+ ", "", line) for line in log.splitlines() if text in line]


def run(
    redis_url: str, crawl: str, seeds: list[str], tmp_path: Path, name: str, **settings: object
) -> str:
    """One worker to its end (exit 0); its log."""
    proc = start_worker(
        REPO_ROOT, redis_url, crawl, seeds, {**FAST, **settings}, tmp_path / f"{name}.log"
    )
    assert wait_all([proc], timeout=120) == [0]
    return proc.log_path.read_text()


def reset(
    redis_url: str, *args: str, answer: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``crawlproject reset ...``: stdin not a terminal, or a terminal that
    answers ``answer``."""
    cmd = [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "reset", *args]
    if answer is None:
        return subprocess.run(
            cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer.encode() + b"\n")
        return subprocess.run(
            cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, stdin=follower
        )
    finally:
        os.close(follower)
        os.close(leader)


def crawl_keys(client: redis.Redis, crawl: str) -> list[bytes]:
    found = [*client.scan_iter(match=f"cp:{{{crawl}}}:*"), *client.scan_iter(f"cp:{{{crawl}/*")]
    return sorted(set(found) | ({f"{crawl}:start_urls".encode()} & set(client.keys("*"))))


def test_run_twice_says_finished_once_then_reset_starts_it_over(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=4, links=1, cross_links=0, query_variants=0)
    seeds = [web.base_url(1)]
    first = run(redis_url, "again", seeds, tmp_path, "first")
    pages = len(web.expected_urls)
    assert page_counts(web.log) == dict.fromkeys(web.expected_urls, 1)
    # A run that had work to do hears neither line.
    assert not lines_with(first, "already finished") and not lines_with(first, "No seeds")

    second = run(redis_url, "again", seeds, tmp_path, "second")
    assert lines_with(second, "already finished") == [finished_line("again", pages)]
    assert "Frontier empty and nothing in flight" in second  # then the usual idle end
    assert page_counts(web.log) == dict.fromkeys(web.expected_urls, 1)  # nothing fetched

    client = redis.Redis.from_url(redis_url)
    # Neighbours a careless pattern would take: crawls "again2", "agai", a list.
    neighbours = [b"cp:{again2}:meta", b"cp:{again2/0}:ready", b"cp:{agai}:meta", b"x:again"]
    for key in neighbours:
        client.set(key, b"1")
    before = crawl_keys(client, "again")
    assert b"cp:{again}:meta" in before and len(before) > 5
    lasting = {key for key in before if client.ttl(key) == -1}  # others expire in time

    # No terminal to ask on, no --yes: refused in one line, nothing deleted.
    refused = reset(redis_url, "--crawl", "again")
    assert refused.returncode == 1 and refused.stdout == ""
    assert lasting <= set(crawl_keys(client, "again"))
    assert refused.stderr == (
        "crawlproject: not reset: no terminal to ask on; to delete crawl 'again', run "
        "crawlproject reset --crawl again --yes\n"
    )
    # It asks; anything but y keeps the crawl.
    kept = reset(redis_url, "--crawl", "again", answer="n")
    assert kept.returncode == 0 and kept.stdout.endswith("[y/N] crawl 'again' kept\n")
    assert "Delete every key of crawl 'again'" in kept.stdout
    assert lasting <= set(crawl_keys(client, "again"))
    done = reset(redis_url, "--crawl", "again", answer="y")
    assert done.returncode == 0, done.stderr
    said = re.fullmatch(r".*\[y/N\] crawl 'again' reset: deleted (\d+) key\(s\)\n", done.stdout)
    assert said is not None, done.stdout
    assert len(lasting) <= int(said[1]) <= len(before)
    assert crawl_keys(client, "again") == []
    assert all(client.exists(key) for key in neighbours)  # other crawls untouched
    again = reset(redis_url, "--crawl", "again", "--yes")
    assert again.stdout == "crawl 'again' has no keys in this Redis: nothing to delete\n"

    # Started over: every page fetched again, and no "finished" line.
    third = run(redis_url, "again", seeds, tmp_path, "third")
    assert page_counts(web.log) == dict.fromkeys(web.expected_urls, 2)
    assert not lines_with(third, "already finished")


def test_flush_on_start_starts_the_crawl_over(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=3, links=1, cross_links=0, query_variants=0)
    seeds = [web.base_url(1)]
    run(redis_url, "flushed", seeds, tmp_path, "first")
    client = redis.Redis.from_url(redis_url)
    before = crawl_keys(client, "flushed")
    lasting = [key for key in before if client.ttl(key) == -1]
    log = run(redis_url, "flushed", seeds, tmp_path, "second", SCHEDULER_FLUSH_ON_START=True)
    [line] = lines_with(log, "started over")
    said = re.fullmatch(
        rf"{re.escape(SCHEDULER)} INFO: SCHEDULER_FLUSH_ON_START=True: crawl 'flushed' started "
        r"over \((\d+) key\(s\) deleted: its queues, seen URLs, duplicate index, robots and "
        r"recrawl state, seed list\)",
        line,
    )
    assert said is not None, line
    # Its own heartbeat (written before it counts the crawl's workers) is one more.
    assert len(lasting) + 1 <= int(said[1]) <= len(before) + 1
    assert page_counts(web.log) == dict.fromkeys(web.expected_urls, 2)  # a fresh crawl
    assert not lines_with(log, "already finished")


def test_reset_and_flush_are_refused_while_a_worker_runs(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=3, links=1, cross_links=0, query_variants=0)
    client = redis.Redis.from_url(redis_url)
    worker = start_worker(
        REPO_ROOT, redis_url, "busy", [web.base_url(1)], FAST, tmp_path / "busy.log",
        extra_args=["-a", "mode=continuous"],
    )  # fmt: skip
    try:
        wait_until(lambda: len(page_counts(web.log)) == len(web.expected_urls), timeout=90)
        before = crawl_keys(client, "busy")

        refused = reset(redis_url, "--crawl", "busy", "--yes")
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr == f"crawlproject: not reset: {WORKERS_ALIVE}\n"

        flusher = start_worker(
            REPO_ROOT, redis_url, "busy", [], {**FAST, "SCHEDULER_FLUSH_ON_START": True},
            tmp_path / "flusher.log",
        )  # fmt: skip
        assert wait_all([flusher], timeout=90, check=False) == [1]
        log = flusher.log_path.read_text()
        assert lines_with(log, "Not started") == [
            f"{SCHEDULER} ERROR: Not started: SCHEDULER_FLUSH_ON_START=True would delete "
            f"crawl 'busy' under its workers: {WORKERS_ALIVE}; or drop the setting to join them"
        ]
        assert "Traceback" not in log
        # Nothing lost: the crawl's keys are there, the refused worker not among its workers.
        kept = [k for k in before if k.endswith((b":meta", b":scope")) or b":seen" in k]
        assert len(kept) > 2 and set(kept) <= set(crawl_keys(client, "busy"))
        assert client.zcard("cp:{busy}:workers") == 1
        assert worker.poll() is None
    finally:
        stop_worker(worker)
    assert wait_all([worker], timeout=60) == [0]
    assert len(page_counts(web.log)) == len(web.expected_urls)


def test_no_seeds_is_one_warning_then_the_idle_end(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    log = run(redis_url, "empty", [], tmp_path, "empty")
    assert lines_with(log, "No seeds") == [
        f"{SCHEDULER} WARNING: No seeds: crawl 'empty' has nothing queued and nothing done. "
        "Give seeds with -a seeds=URL,URL or -a seeds_file=FILE, or while this worker waits "
        "(1.5 s, CRAWL_IDLE_CLOSE_SECONDS): crawlproject --crawl empty seed URL (or LPUSH "
        "empty:start_urls URL)"
    ]
    assert "Frontier empty and nothing in flight" in log
    # A spider with its own start URLs never hears it.
    web = testweb_factory(hosts=1, pages=2, links=1, cross_links=0, query_variants=0)
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], FAST, tmp_path / "own.log",
        extra_args=["-a", "start=" + web.base_url(1)], spider="tutorial",
    )  # fmt: skip
    assert wait_all([proc], timeout=120) == [0]
    own = proc.log_path.read_text()
    assert not lines_with(own, "No seeds") and not lines_with(own, "already finished")
    assert page_counts(web.log)
