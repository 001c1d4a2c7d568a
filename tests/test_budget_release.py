"""The operator's hosts have no budget; URLs over budget are released by the
command and by a raised CRAWL_HOST_BUDGET, each exactly once (add.lua,
budget_release.lua, on a real redis-server). Pure-logic tests of
OperatorScope and the outbox's scope vote sit beside them."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from types import SimpleNamespace

import pytest
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from crawlproject.frontier.admission.link_votes import SCOPE_VOTE, vote_of
from crawlproject.frontier.store.operator_scope import OperatorScope
from crawlproject.frontier.store.outbox import SWEEP_MIN_SECONDS, Outbox
from crawlproject.frontier.store.redis_frontier import NO_VOTE, SEED_VOTE, HostBudget, RedisFrontier
from testkit.entries import CODEC, entry
from tests.conftest import MakeFrontier

# Budgets as the defaults have them: the operator's hosts have none.
BUDGET = HostBudget(base=10, seed_votes=0)


async def drain(f: RedisFrontier) -> list[str]:
    """Every queued URL, claimed and acked, in claim order."""
    urls: list[str] = []
    for _ in range(500):
        got = False
        for shard in range(f.keys.shards):
            batch = (await f.claim(shard, 100, "w")).items
            if batch:
                got = True
                urls += [CODEC.decode(data, None).url for _, data in batch]
                await f.ack([lease for lease, _ in batch])
        if not got:
            break
    return urls


def waiting(counters: dict[str, int]) -> int:
    return counters.get("over_budget", 0) - counters.get("budget_released", 0)


async def test_the_operators_hosts_have_no_budget(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=BUDGET)
    seeded = await f.add(
        [entry("http://seeded.test/", vote=SEED_VOTE)]
        + [entry(f"http://seeded.test/{i}") for i in range(40)]
    )
    assert (seeded.added, seeded.over_budget) == (41, 0)
    scoped = await f.add(
        [entry("http://blog.seeded.test/0", vote=SCOPE_VOTE)]
        + [entry(f"http://blog.seeded.test/{i}") for i in range(1, 40)]
    )
    assert (scoped.added, scoped.over_budget) == (40, 0)
    # A host the crawl found by itself keeps its budget: 10 URLs, no vote but its own.
    found = await f.add([entry(f"http://found.test/{i}") for i in range(25)])
    assert (found.added, found.over_budget) == (10, 15)
    assert await f.over_budget_by_host() == {"found.test": 15}


async def test_a_host_that_becomes_the_operators_releases_its_overflow_once(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=BUDGET)
    await f.add([entry(f"http://later.test/{i}") for i in range(25)])
    assert await drain(f) == [f"http://later.test/{i}" for i in range(10)]
    # Seeded later (crawlproject seed): everything that waited goes in, in order.
    result = await f.add([entry("http://later.test/0", vote=SEED_VOTE)])
    assert (result.released, result.added) == (15, 15)
    more = await f.add([entry(f"http://later.test/{i}") for i in range(25, 30)])
    assert (more.added, more.over_budget) == (5, 0)
    assert await drain(f) == [f"http://later.test/{i}" for i in range(10, 30)]
    assert await f.over_budget_by_host() == {}
    assert waiting(await f.counters()) == 0


@pytest.mark.parametrize("mode", ["score", "credit"])
async def test_the_release_command_moves_exactly_the_waiting_urls(
    make_frontier: MakeFrontier, mode: str
) -> None:
    f = await make_frontier(shards=2, delay_ms=0, conc=100, budget=BUDGET, priority_mode=mode)
    hosts = ["a.test", "b.test", "c.test"]
    await f.add([entry(f"http://{h}/{i}", score=1.0) for h in hosts for i in range(35)])
    assert await f.over_budget_by_host() == {h: 25 for h in hosts}
    first = await drain(f)
    assert len(first) == 30 and len(set(first)) == 30
    # One host by name; its budget stays for later URLs.
    assert await f.release_over_budget(["a.test"]) == 25
    assert await f.release_over_budget(["a.test"]) == 0  # nothing left: nothing twice
    later = await f.add([entry("http://a.test/new", score=1.0)])
    assert later.over_budget == 1
    # Then every host with URLs waiting.
    assert await f.release_over_budget() == 1 + 25 + 25
    assert await f.over_budget_by_host() == {}
    rest = await drain(f)
    every = {f"http://{h}/{i}" for h in hosts for i in range(35)} | {"http://a.test/new"}
    assert sorted(first + rest) == sorted(every)  # each URL exactly once
    counters = await f.counters()
    assert waiting(counters) == 0 and counters["queued"] == 0
    if mode == "score":  # one band: in the order they came
        a = [u for u in rest if u.startswith("http://a.test/")]
        assert a == [f"http://a.test/{i}" for i in range(10, 35)] + ["http://a.test/new"]


async def test_a_raised_budget_releases_what_now_fits_once(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=2, delay_ms=0, conc=100, budget=BUDGET)
    await f.add([entry(f"http://big.test/{i}") for i in range(50)])
    await f.add([entry(f"http://small.test/{i}") for i in range(12)])
    assert await f.over_budget_by_host() == {"big.test": 40, "small.test": 2}
    assert len(await drain(f)) == 20
    # The next start with CRAWL_HOST_BUDGET = 25: what fits goes in, once.
    raised = await make_frontier(shards=2, delay_ms=0, conc=100, budget=replace(BUDGET, base=25))
    assert await raised.sweep_budgets(lambda host: False) == 15 + 2
    assert await raised.sweep_budgets(lambda host: False) == 0  # a second start: nothing
    assert await raised.over_budget_by_host() == {"big.test": 25}
    released = await drain(raised)
    assert [u for u in released if "big" in u] == [f"http://big.test/{i}" for i in range(10, 25)]
    assert [u for u in released if "small" in u] == ["http://small.test/10", "http://small.test/11"]
    assert waiting(await raised.counters()) == 25


async def test_a_sweep_releases_hosts_now_in_scope_and_marks_them(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=BUDGET)
    await f.add([entry(f"http://www.site.test/{i}") for i in range(30)])
    await f.add([entry(f"http://elsewhere.test/{i}") for i in range(30)])
    assert len(await drain(f)) == 20

    def in_scope(host: str) -> bool:
        return host.endswith("site.test")

    assert await f.sweep_budgets(in_scope) == 20  # www.site.test's, all of them
    assert await f.over_budget_by_host() == {"elsewhere.test": 20}
    assert await drain(f) == [f"http://www.site.test/{i}" for i in range(10, 30)]
    # Marked in scope: its later URLs are not budgeted.
    more = await f.add([entry(f"http://www.site.test/{i}") for i in range(30, 45)])
    assert (more.added, more.over_budget) == (15, 0)


async def test_a_parked_hosts_overflow_stays(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=BUDGET)
    await f.add([entry(f"http://trap.test/{i}") for i in range(15)])
    await f.park_host("trap.test", "duplicates")
    assert await f.release_over_budget() == 0
    assert await f.over_budget_by_host() == {"trap.test": 5}


def spider(**attrs: object) -> SimpleNamespace:
    return SimpleNamespace(**attrs)


def test_operator_scope_follows_the_spiders_scope() -> None:
    hosts = OperatorScope()
    hosts.watch(spider(scope="hosts"))
    assert hosts.see({"example.com", "docs.test:8080", "secure.test:443"})
    assert not hosts.see({"example.com"})  # nothing new
    assert hosts.covers("example.com") and hosts.covers("docs.test:8080")
    assert hosts.covers("secure.test")  # port 443 is the host itself in a politeness key
    assert not hosts.covers("www.example.com") and not hosts.covers("docs.test")

    domains = OperatorScope()
    domains.watch(spider(scope="domains"))
    domains.see({"example.com"})
    assert domains.covers("www.example.com") and domains.covers("a.b.example.com:8080")
    assert not domains.covers("example.org")

    found = OperatorScope()  # scope any: only the seeds' hosts (their seed mark)
    found.watch(spider(scope="any"))
    found.see({"example.com"})
    assert not found.active and not found.covers("example.com")

    own = OperatorScope()  # a spider of one's own: its allowed_domains
    own.watch(spider(allowed_domains=["shop.test"]))
    assert own.active
    assert own.covers("shop.test") and own.covers("img.shop.test:8080")
    assert not own.covers("notshop.test")


def test_the_outbox_sends_the_scope_vote_once_per_host() -> None:
    outbox = Outbox(MemoryStatsCollector(get_crawler()), credit_mode=False)
    outbox.watch_scope(spider(scope="domains"))
    outbox.see_scope({"example.com"})
    link = entry("http://blog.example.com/1", vote=vote_of("other.test"))
    outbox.add(link)  # a domain's vote goes as it is
    outbox.add(entry("http://blog.example.com/2"))
    outbox.add(entry("http://blog.example.com/3"))
    outbox.add(entry("http://found.test/1"))
    assert [e.vote for e in outbox._entries] == [link.vote, SCOPE_VOTE, NO_VOTE, NO_VOTE]


async def test_the_budget_command_lists_and_releases(
    make_frontier: MakeFrontier, redis_url: str
) -> None:
    f = await make_frontier(crawl="cli", shards=4, delay_ms=0, conc=100, budget=BUDGET)
    await f.add([entry(f"http://{h}/{i}") for h in ("a.test", "b.test") for i in range(14)])
    cli = [sys.executable, "-m", "crawlproject", "--redis-url", redis_url, "--crawl", "cli"]

    async def run(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            *cli, "budget", *args, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await proc.communicate()
        assert proc.returncode == 0
        return out.decode()

    assert json.loads(await run()) == {"a.test": 4, "b.test": 4}
    assert "released 4 URL(s)" in await run("--release", "a.test", "nowhere.test")
    assert json.loads(await run()) == {"b.test": 4}
    assert "released 4 URL(s)" in await run("--release")
    assert json.loads(await run()) == {}
    urls = await drain(f)
    every = {f"http://{h}/{i}" for h in ("a.test", "b.test") for i in range(14)}
    assert len(urls) == 28 and set(urls) == every  # each once


async def test_a_workers_first_write_sweeps_and_so_does_a_growing_scope(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(shards=2, delay_ms=0, conc=100, budget=BUDGET)
    await f.add(
        [entry(f"http://{h}/{i}") for h in ("a.example.com", "b.other.org") for i in range(15)]
    )
    # The next worker: budgets off (CRAWL_HOST_BUDGET = 0) lets everything in.
    off = await make_frontier(shards=2, delay_ms=0, conc=100, budget=replace(BUDGET, base=0))
    outbox = Outbox(MemoryStatsCollector(get_crawler()), credit_mode=False)
    outbox.watch_scope(spider(scope="domains"))

    def nothing(*_: object) -> None:
        raise AssertionError("nothing else to write")

    await outbox.write(off, nothing, nothing, nothing)  # type: ignore[arg-type]
    assert outbox.stats.get_value("frontier/budget_released") == 10
    assert await f.over_budget_by_host() == {}

    # A crawl's scope that grows: the hosts under the new root are swept, once
    # SWEEP_MIN_SECONDS after the last sweep.
    await f.add([entry(f"http://c.example.net/{i}") for i in range(15)])
    outbox.see_scope({"example.net"})
    outbox._swept_at -= SWEEP_MIN_SECONDS
    await outbox.write(f, nothing, nothing, nothing)  # type: ignore[arg-type]
    assert outbox.stats.get_value("frontier/budget_released") == 15
    assert await f.over_budget_by_host() == {}
