"""A page whose item cannot be saved is not lost: real crawls in which the
spool directory breaks mid-crawl (every write fails with ENOTDIR/EEXIST, not a
full disk), and in which a user's pipeline raises ItemNotSaved. The worker
stops with ``item_not_saved`` (exit 1), the page goes back to the frontier,
and a second worker fetches and stores it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from scrapy import Request
from scrapy.utils.test import get_crawler

from crawlproject.frontier.claims.leases import LeaseState
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from crawlproject.recrawl.store import RecrawlStore
from testkit.crawlproc import (
    REPO_ROOT,
    WorkerProcess,
    start_worker,
    stats_of,
    stop_worker,
    wait_all,
    wait_until,
)
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb, page_counts
from tests.conftest import MakeFrontier
from tests.test_frontier_scripts import CODEC, claim_all, entry, urls_of
from tests.test_store_faults import payload_of, read_items, sent_bodies, spooled

IDLE = {"CRAWL_IDLE_CLOSE_SECONDS": 1.0, "CRAWL_IDLE_POLL_SECONDS": 0.2}
STOPPING = "Stopping the worker (item_not_saved): an item of "
# The middleware's line for every page returned: the first (ERROR) or a later one.
NOT_SAVED_URL = re.compile(r"(?:an item of|Not saved: an item of) (\S+) ")


def counts(redis_url: str, crawl: str) -> dict[str, int]:
    """``crawlproject counts``: the frontier's counters."""
    out = subprocess.run(
        [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", crawl,
         "counts"], cwd=REPO_ROOT, check=True, capture_output=True, timeout=60,
    ).stdout  # fmt: skip
    return dict(json.loads(out))


def not_saved_urls(log: Path) -> list[str]:
    return [
        m.group(1)
        for line in log.read_text(errors="replace").splitlines()
        if "middlewares.frontier_ack" in line and (m := NOT_SAVED_URL.search(line))
    ]


def break_directory(directory: Path) -> Path:
    """Moves ``directory`` aside (its open files stay writable) and puts a
    regular file in its place: creating or renaming a file in it now fails
    (ENOTDIR), and so does re-creating it (EEXIST). Returns where it went."""
    for n in range(10):
        aside = directory.with_name(f"{directory.name}.broken{n}")
        directory.rename(aside)
        try:
            directory.touch(exist_ok=False)
        except FileExistsError:  # the writer re-created it in between: again
            continue
        return aside
    raise AssertionError("the writer kept re-creating the directory")


def repair_directory(directory: Path, aside: Path) -> None:
    directory.unlink()
    for n in range(10):
        extra = directory.with_name(f"{directory.name}.broken{n}")
        if extra != aside and extra.exists():  # from a retry of break_directory
            for path in extra.iterdir():
                path.rename(aside / path.name)
            extra.rmdir()
    aside.rename(directory)


def test_a_broken_spool_stops_the_worker_and_loses_no_page(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # 3 hosts x 20 pages at 0.25 s a page per host: ~5 s of crawl; ~8 KB files
    # (3-4 pages of ~2.2 KB) finish often, so the first one is uploaded early
    # and the open file reaches its rotation (a rename in the broken directory)
    # a few pages after the break.
    web = testweb_factory(hosts=3, pages=20, latency_ms=5, links=2, cross_links=1,
                          query_variants=0)  # fmt: skip
    data = tmp_path / "data"
    spool = data / "spool" / "broken"
    settings = {
        **IDLE, "CRAWL_HOST_DELAY": 0.25, "CRAWL_DEDUPE_ENABLED": False,
        "CRAWL_DATA_DIR": str(data), "CRAWL_STORE_ROTATE_BYTES": 8_000,
        "CRAWL_STORE_SPOOL_MAX_BYTES": 0, "CRAWL_STORE_SPOOL_MIN_FREE_BYTES": 0,
        "CRAWL_STORE_CLOSE_TIMEOUT_SECONDS": 2,
    }  # fmt: skip
    feeds = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    first = start_worker(REPO_ROOT, redis_server.url, "broken", web.seeds, settings,
                         tmp_path / "first.log", ["-O", str(feeds[0])])  # fmt: skip
    second: WorkerProcess | None = None
    try:
        wait_until(
            lambda: (
                " uploaded to " in first.log_path.read_text(errors="replace")
                or first.poll() is not None
            ),
            timeout=30,
        )
        assert first.poll() is None, "the crawl ended before the spool broke"
        aside = break_directory(spool)
        (code,) = wait_all([first], timeout=30, check=False)
        fetched_by_first = len(page_counts(web.log))
        after_first = counts(redis_server.url, "broken")
        repair_directory(spool, aside)
        second = start_worker(REPO_ROOT, redis_server.url, "broken", web.seeds, settings,
                              tmp_path / "second.log", ["-O", str(feeds[1])])  # fmt: skip
        wait_all([second], timeout=30)
    finally:
        for proc in (first, second):
            if proc is not None:
                stop_worker(proc, signal.SIGKILL)

    # The first worker stopped at once, with one clear line and exit status 1.
    text = first.log_path.read_text(errors="replace")
    stats = stats_of(first.log_path)
    assert code == 1
    assert "'finish_reason': 'item_not_saved'" in text
    assert text.count(STOPPING) == 1
    assert fetched_by_first < len(web.expected_urls), "it went on crawling"
    returned = not_saved_urls(first.log_path)
    assert returned and len(set(returned)) == len(returned)
    assert stats["frontier/outcome/not_saved"] == len(returned)
    assert stats["store/write_failed"] >= len(returned)
    for url in returned:
        assert f"Could not store {url}: [Errno " in text
    # Its pages stored before the break were finished; the others went back
    # (none lost to an expired lease: nothing is leased).
    first_items = read_items(feeds[0])
    assert not {i["url"] for i in first_items} & set(returned)
    assert after_first["done"] == len(first_items)
    assert after_first["leased"] == 0
    assert after_first["queued"] >= len(returned)

    # The second worker fetched the returned pages again and finished the crawl;
    # every page is stored, readable, byte-identical: none lost.
    second_items = read_items(feeds[1])
    assert set(returned) <= {i["url"] for i in second_items}
    bodies = sent_bodies(web)
    items = first_items + second_items
    assert sorted(i["url"] for i in items) == sorted(web.expected_urls)
    for item in items:
        assert payload_of(data / "bodies", item) == bodies[item["url"]]
    # Fetched twice: exactly the returned pages; every other page once.
    fetches = page_counts(web.log)
    assert set(fetches) == web.expected_urls
    assert {url for url, n in fetches.items() if n > 1} == set(returned)
    assert max(fetches.values()) == 2
    final = counts(redis_server.url, "broken")
    assert (final["done"], final["queued"], final["leased"]) == (len(web.expected_urls), 0, 0)
    assert stats_of(second.log_path)["store/files_spooled_at_close"] == 0
    assert not spooled(data)
    print(
        f"first worker: exit {code}, {len(first_items)} pages stored, {len(returned)} returned "
        f"{returned}, {stats['store/write_failed']} failed writes; second: "
        f"{len(second_items)} pages; fetches {sum(fetches.values())} for {len(fetches)} URLs"
    )


def test_a_pipeline_raising_item_not_saved_returns_its_page(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # The generic contract, for any pipeline: a user's raises ItemNotSaved for one page.
    web = testweb_factory(hosts=2, pages=10, latency_ms=0, links=2, cross_links=1,
                          query_variants=0)  # fmt: skip
    lost = web.base_url(1) + web.path_of(3).lstrip("/")
    data = tmp_path / "data"
    settings = {**IDLE, "CRAWL_HOST_DELAY": 0.2, "CRAWL_DEDUPE_ENABLED": False,
                "CRAWL_DATA_DIR": str(data)}  # fmt: skip
    failing = {
        **settings,
        "TEST_NOT_SAVED_URL": lost,
        "ITEM_PIPELINES": {
            "tests.spiders_for_tests.unsaved_pipeline.UnsavedPipeline": 50,
            "pipelines.dedupe.DedupePipeline": 100,
            "pipelines.store.BodyStorePipeline": 200,
        },
    }
    feeds = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    first = start_worker(REPO_ROOT, redis_server.url, "db", web.seeds, failing,
                         tmp_path / "first.log", ["-O", str(feeds[0])])  # fmt: skip
    try:
        (code,) = wait_all([first], timeout=30, check=False)
    finally:
        stop_worker(first, signal.SIGKILL)
    after_first = counts(redis_server.url, "db")
    second = start_worker(REPO_ROOT, redis_server.url, "db", web.seeds, settings,
                          tmp_path / "second.log", ["-O", str(feeds[1])])  # fmt: skip
    try:
        wait_all([second], timeout=30)
    finally:
        stop_worker(second, signal.SIGKILL)

    text = first.log_path.read_text(errors="replace")
    assert code == 1 and "'finish_reason': 'item_not_saved'" in text
    assert text.count(STOPPING) == 1
    assert not_saved_urls(first.log_path) == [lost]
    assert "the test database is down" in text
    assert stats_of(first.log_path)["frontier/outcome/not_saved"] == 1
    first_items = read_items(feeds[0])
    assert lost not in {i["url"] for i in first_items}
    assert after_first["done"] == len(first_items) and after_first["leased"] == 0
    second_items = read_items(feeds[1])
    assert lost in {i["url"] for i in second_items}
    assert sorted(i["url"] for i in first_items + second_items) == sorted(web.expected_urls)
    fetches = page_counts(web.log)
    assert fetches[lost] == 2
    assert fetches == Counter(dict.fromkeys(web.expected_urls, 1)) + Counter([lost])


def no_recrawl() -> RecrawlStore:
    raise AssertionError("no recrawl state was written")


async def test_lease_returned_puts_the_url_back_after_its_links(
    make_frontier: MakeFrontier,
) -> None:
    crawler = get_crawler(
        settings_dict={"SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler"}
    )
    assert crawler.stats is not None
    scheduler = FrontierScheduler.from_crawler(crawler)
    frontier = scheduler.frontier = await make_frontier(shards=1, delay_ms=0)
    await frontier.add([entry("http://a.test/1"), entry("http://b.test/1")])
    requests: dict[str, Request] = {}
    leases, outbox = scheduler.leases, scheduler.outbox
    for lease, data in await claim_all(frontier):
        request = CODEC.decode(data, None)
        leases.hold(lease, request, LeaseState.SCRAPING)
        requests[request.url] = request
    # a.test/1 was fetched and produced a link, but its item was not saved.
    outbox.add(entry("http://c.test/link"))
    leases.returned(requests["http://a.test/1"])
    leases.returned(requests["http://a.test/1"])  # idempotent
    leases.done(requests["http://b.test/1"], "scraped")
    assert [mode for mode, _ in outbox.pending_acks] == ["return", "done"]
    await outbox.write(frontier, no_recrawl, lambda shards: None, lambda done: None)
    assert outbox.pending_acks == [] and not outbox and len(leases) == 0
    counts = await frontier.counters()
    assert (counts["done"], counts["leased"], counts["queued"]) == (1, 0, 2)
    assert sorted(urls_of(await claim_all(frontier))) == ["http://a.test/1", "http://c.test/link"]
    assert crawler.stats.get_value("frontier/outcome/not_saved") == 1
    assert crawler.stats.get_value("frontier/outcome/scraped") == 1
