"""A URL that kills or hangs every worker that takes it is set aside after
CRAWL_MAX_RECLAIMS reclaims (the ``poison`` list), so the crawl finishes.

Script level against a real redis-server, then real worker processes killed by
a test-only middleware (tests/spiders_for_tests/poison.py).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from crawlproject import settings as project_settings
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import Lease, RedisFrontier, Release
from testkit.crawlproc import REPO_ROOT, WorkerProcess, start_worker, stats_of, tail
from testkit.entries import CODEC, entry
from testkit.testweb import TestWeb, page_counts, page_path
from tests.conftest import MakeFrontier
from tests.spiders_for_tests.poison import POISON_EXIT_CODE

LEASE_MS = 100


async def claim_one(f: RedisFrontier) -> tuple[Lease, str]:
    (item,) = (await f.claim(0, 10, "w1")).items
    return item[0], CODEC.decode(item[1], None).url


async def expire_and_reclaim(f: RedisFrontier) -> tuple[int, int]:
    await asyncio.sleep(LEASE_MS / 1000 + 0.05)
    return await f.reclaim(0)


async def reclaim_counts(f: RedisFrontier) -> list[int]:
    values = await f.redis.hvals(f.keys.shard_prefixes[0] + "reclaims")
    return sorted(int(v) for v in values)


@pytest.mark.parametrize("mode", ["score", "credit"])
async def test_the_nth_reclaim_sets_the_url_aside(make_frontier: MakeFrontier, mode: str) -> None:
    f = await make_frontier(
        shards=1, delay_ms=0, lease_ms=LEASE_MS, max_reclaims=3, priority_mode=mode
    )
    prefix = f.keys.shard_prefixes[0]
    await f.add([entry("http://a.test/1", 1.0), entry("http://a.test/2", 1.0)])
    for times in (1, 2):
        _, url = await claim_one(f)
        assert url == "http://a.test/1"  # back at the head of its band each time
        assert (await f.claim(0, 10, "w1")).items == []  # its host's one slot is taken
        assert await expire_and_reclaim(f) == (1, 0)
        assert await reclaim_counts(f) == [times]
        assert (await f.counters())["queued"] == 2
    await claim_one(f)
    assert await expire_and_reclaim(f) == (1, 1)  # the third: poison
    assert await f.redis.exists(prefix + "reclaims") == 0  # its count goes with it
    assert await f.redis.llen(prefix + "poison") == 1
    assert await f.redis.llen(prefix + "dead") == 0
    assert await f.poisoned_urls() == ["http://a.test/1"]
    # The host's slot is free: its other URL is claimable at once.
    _, url = await claim_one(f)
    assert url == "http://a.test/2"
    assert (await f.host_state("a.test"))["inflight"] == 1
    counts = await f.counters()
    assert (counts["poisoned"], counts["reclaimed"]) == (1, 3)
    assert (counts["queued"], counts["leased"]) == (0, 1)
    # An operator who fixed the cause puts it back (crawlproject poisoned --requeue).
    assert await f.unpark_all("poison") == 1
    assert await f.redis.llen(prefix + "poison") == 0
    counts = await f.counters()
    assert (counts["queued"], counts["unpoisoned"], counts["poisoned"]) == (1, 1, 1)
    assert "unparked" not in counts


async def test_a_url_in_processing_is_set_aside_too(make_frontier: MakeFrontier) -> None:
    # A worker that dies in a parser holds the lease in state p (slot released).
    f = await make_frontier(shards=1, delay_ms=0, lease_ms=LEASE_MS, max_reclaims=1)
    await f.add([entry("http://a.test/1"), entry("http://a.test/2")])
    lease, _ = await claim_one(f)
    assert await f.release([Release(lease, 0)]) == 1
    assert await expire_and_reclaim(f) == (1, 1)
    assert (await claim_one(f))[1] == "http://a.test/2"
    assert (await f.counters())["leased"] == 1


async def test_a_finished_url_drops_its_count(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, lease_ms=LEASE_MS, max_reclaims=3)
    prefix = f.keys.shard_prefixes[0]
    await f.add([entry("http://a.test/1"), entry("http://b.test/1")])
    assert len((await f.claim(0, 10, "w1")).items) == 2
    assert await expire_and_reclaim(f) == (2, 0)
    assert await reclaim_counts(f) == [1, 1]
    items = dict(
        (CODEC.decode(d, None).url, lease) for lease, d in (await f.claim(0, 10, "w1")).items
    )
    # Handed back by a stopping worker: not finished, the count stays.
    assert await f.ack([items["http://a.test/1"]], "return") == (1, 0)
    assert await reclaim_counts(f) == [1, 1]
    assert await f.ack([items["http://b.test/1"]], "done") == (1, 0)
    assert await reclaim_counts(f) == [1]
    lease, _ = await claim_one(f)
    assert await f.ack([lease], "moved") == (1, 0)
    assert await f.redis.exists(prefix + "reclaims") == 0


async def test_a_normal_url_costs_no_bytes(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, lease_ms=LEASE_MS, max_reclaims=3)
    await f.add([entry("http://a.test/1")])
    lease, _ = await claim_one(f)
    assert await f.ack([lease], "done") == (1, 0)
    assert await f.redis.exists(f.keys.shard_prefixes[0] + "reclaims") == 0


async def test_zero_means_no_limit(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, lease_ms=LEASE_MS, max_reclaims=0)
    prefix = f.keys.shard_prefixes[0]
    await f.add([entry("http://a.test/1")])
    for _ in range(5):
        assert (await claim_one(f))[1] == "http://a.test/1"
        assert await expire_and_reclaim(f) == (1, 0)
    assert await f.redis.exists(prefix + "reclaims", prefix + "poison") == 0
    counts = await f.counters()
    assert counts["reclaimed"] == 5 and "poisoned" not in counts and counts["queued"] == 1


# -- real workers -------------------------------------------------------------------

MAX_RECLAIMS = 2
POISON_MIDDLEWARE = "tests.spiders_for_tests.poison.ExitOnUrlMiddleware"
WORKER_TIMEOUT_SECONDS = 30


def crawl_until_a_worker_finishes(
    redis_url: str, web: TestWeb, poison: str, tmp_path: Path, max_reclaims: int, workers: int
) -> list[WorkerProcess]:
    """Workers one after another (each restarted after the last died) until one
    exits 0 or ``workers`` have run."""
    settings = {
        "CRAWL_MAX_RECLAIMS": max_reclaims,
        "CRAWL_LEASE_SECONDS": 2,
        "CRAWL_HOST_DELAY": 0.05,
        "CRAWL_IDLE_CLOSE_SECONDS": 1,
        "CRAWL_IDLE_POLL_SECONDS": 0.2,
        # One fetch at a time: the worker dies holding the poison URL alone.
        "CONCURRENT_REQUESTS": 1,
        "CRAWL_CLAIM_PREFETCH": 0,
        "DOWNLOADER_MIDDLEWARES": {
            **project_settings.DOWNLOADER_MIDDLEWARES,
            POISON_MIDDLEWARE: 950,
        },
        "TEST_POISON_URL": poison,
        "TEST_POISON_WAIT_SECONDS": 0.5,
        "LOG_LEVEL": "INFO",
    }
    procs: list[WorkerProcess] = []
    for i in range(workers):
        proc = start_worker(
            REPO_ROOT, redis_url, "poison", web.seeds, settings, tmp_path / f"w{i}.log"
        )
        procs.append(proc)
        try:
            proc.wait(WORKER_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"worker {i} still running:\n{tail(proc.log_path)}") from None
        if proc.returncode == 0:
            break
        assert proc.returncode == POISON_EXIT_CODE, tail(proc.log_path)
    return procs


def test_a_url_that_kills_its_workers_is_set_aside_and_the_crawl_finishes(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=2, pages=4, latency_ms=0, links=2, cross_links=0, query_variants=0)
    # The last page of host 1's chain: the pages it links to are linked from others too.
    poison = web.base_url(1) + page_path(3)[1:]
    assert poison in web.expected_urls
    procs = crawl_until_a_worker_finishes(
        redis_url, web, poison, tmp_path, MAX_RECLAIMS, workers=MAX_RECLAIMS + 2
    )

    # It killed MAX_RECLAIMS workers, then the next one finished the crawl.
    assert [p.returncode for p in procs] == [POISON_EXIT_CODE] * MAX_RECLAIMS + [0]
    # Every other page was fetched; the poison URL killed each worker before its fetch.
    assert set(page_counts(web.log)) == web.expected_urls - {poison}
    deaths = [p for p in procs if "Poison URL" in p.log_path.read_text(errors="replace")]
    assert len(deaths) == MAX_RECLAIMS
    last = procs[-1].log_path.read_text(errors="replace")
    assert "as poison" in last and stats_of(procs[-1].log_path)["frontier/poisoned"] == 1
    keys = CrawlKeys("poison", NEW_CRAWL_SHARDS)  # a new crawl's shards
    with redis.Redis.from_url(redis_url) as client:
        assert sum(client.llen(keys.poison(s)) for s in range(keys.shards)) == 1
        assert not any(client.exists(p + "reclaims") for p in keys.shard_prefixes)
    cli = [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", "poison"]
    counts = json.loads(
        subprocess.run([*cli, "counts"], cwd=REPO_ROOT, check=True, capture_output=True).stdout
    )
    assert counts["poisoned"] == 1 and counts["queued"] == counts["leased"] == 0
    shown = subprocess.run([*cli, "poisoned"], cwd=REPO_ROOT, check=True, capture_output=True)
    # The request as stored (a link's fragment kept: the fetch drops it).
    assert [url.partition("#")[0] for url in json.loads(shown.stdout)] == [poison]
    requeued = subprocess.run(
        [*cli, "poisoned", "--requeue"], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    )
    assert requeued.stdout.strip() == "requeued 1 poisoned URL(s)"
    counts = json.loads(
        subprocess.run([*cli, "counts"], cwd=REPO_ROOT, check=True, capture_output=True).stdout
    )
    assert counts["queued"] == 1 and counts["unpoisoned"] == 1
