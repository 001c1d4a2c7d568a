"""A slot freed without contact (robots.txt forbade its URL) costs its host no
delay (issue 43: on a web-like farm whose pages all link disallowed URLs, such
slots made one host wait two delays between fetches, a whole delay for a
request never made).

Two ways it did: the URL's ack, sent by the outbox's loop, could reach Redis
before the slot's release "not contacted", and ack.lua frees a slot still held
as a fetch's, one delay from then (two in five such slots on that farm); and
the worker that freed it looked at its shard again only when another host
there was due, though the freed host was due at once.
"""

from __future__ import annotations

import asyncio

from scrapy import Request
from scrapy.utils.test import get_crawler

from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.claims.claim_clock import ClaimClock
from crawlproject.frontier.claims.leases import LeaseBook
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.operation_values import Lease, NewEntry
from crawlproject.recrawl.store import RecrawlStore
from crawlproject.robots.errors import RobotsForbidden
from tests.conftest import MakeFrontier

SHARDS = 32


def book() -> tuple[FrontierScheduler, LeaseBook]:
    crawler = get_crawler(
        settings_dict={"SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler"}
    )
    assert crawler.stats is not None
    crawler.stats.open_spider()
    scheduler = FrontierScheduler.from_crawler(crawler)
    return scheduler, scheduler.leases


def no_recrawl() -> RecrawlStore:
    raise AssertionError("no fetch state is written here")


async def test_the_ack_of_a_forbidden_url_never_frees_its_slot_before_its_release(
    make_frontier: MakeFrontier,
) -> None:
    """The write loop may run before the release loop: its ack waits for the
    release, so the host's next URL is claimable at once, though its delay is
    a minute (before: the ack freed the slot as a fetch's, the host a minute away)."""
    scheduler, leases = book()
    f = await make_frontier(shards=1, delay_ms=60_000, conc=1)
    canon, codec = UrlCanonicalizer([]), RequestCodec(["scrapy.http.request.Request"])
    entries = []
    for url in ("http://a.example/private/1", "http://a.example/p/1"):
        canonical = canon.canonicalize(url)
        data = codec.encode(Request(url), None)
        entries.append(NewEntry(host_key(canonical), canon.fingerprint(canonical), False, data))
    await f.add(entries)
    [(lease, data)] = (await f.claim(0, 10, "w1")).items  # one URL per host and claim
    request = codec.decode(data, None)
    leases.hold(lease, request)
    leases.failed(request, RobotsForbidden("Forbidden by robots.txt", unfetched=True))
    assert len(leases.pending_releases) == 1 and len(scheduler.outbox.pending_acks) == 1
    await scheduler.outbox.write(f, no_recrawl, lambda shards: None, lambda done: None)
    await leases.send_releases(f)  # then the release loop
    assert leases.pending_releases == [] and scheduler.outbox.pending_acks == []
    again = (await f.claim(0, 10, "w2")).items
    assert [codec.decode(d, None).url for _, d in again] == [
        u for u in ("http://a.example/private/1", "http://a.example/p/1") if u != request.url
    ]


async def test_a_slot_freed_without_contact_makes_its_shard_due_at_once() -> None:
    scheduler, leases = book()
    clock = scheduler.clock
    now = asyncio.get_running_loop().time()
    clock.shard_ready[0] = now + 5.0  # the shard's next host, as a claim's reply said
    request = Request("http://a.example/private/1")
    leases.hold(Lease(0, 1), request)
    leases.failed(request, RobotsForbidden("Forbidden by robots.txt", unfetched=True))
    assert clock.shard_ready[0] <= asyncio.get_running_loop().time()  # not a delay later


def test_a_claim_that_ran_before_an_unfetched_release_is_asked_again_when_it_lands() -> None:
    """Even when another host of the shard is due later: before, the shard
    waited for that host (up to a delay), the freed host with it."""
    clock = ClaimClock(poll=10.0)  # no probe of the empty shards within this test
    ask, _ = clock.to_ask(SHARDS, 0.0)
    for shard in ask:
        clock.claimed(shard, None, 0.0, clock.mark(shard), got=0)
    clock.slot_freed(7, due=1.0)  # a forbidden URL's slot: its host due at once
    assert clock.to_ask(SHARDS, now=1.0)[0] == [7]
    mark = clock.mark(7)
    # Redis ran the claim before the release: nothing, another host due at 1.8.
    assert not clock.claimed(7, 1.8, now=1.01, mark=mark, got=0)
    assert clock.to_ask(SHARDS, now=1.02)[0] == []
    clock.released(7, due=1.0)  # the release is in Redis
    assert clock.to_ask(SHARDS, now=1.03)[0] == [7]
