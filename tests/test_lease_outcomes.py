"""The one lease path: what a refusing component raises decides what happens to
the claimed URL's lease (crawlproject/frontier/claims/leases.py LeaseBook.failed),
whether the ack middleware or the spider's errback reports it, in any order."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler

from crawlproject.frontier.basics.outcomes import Requeue
from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.claims.leases import LeaseBook, LeaseState
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.operation_values import Lease, NewEntry
from crawlproject.guard.errors import BlockedAddress
from crawlproject.robots.errors import RobotsDeferred, RobotsForbidden, RobotsUnreachable
from tests.conftest import MakeFrontier


def book() -> tuple[FrontierScheduler, LeaseBook]:
    crawler = get_crawler(
        settings_dict={"SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler"}
    )
    assert crawler.stats is not None
    crawler.stats.open_spider()
    scheduler = FrontierScheduler.from_crawler(crawler)
    return scheduler, scheduler.leases


def claimed(leases: LeaseBook, lease_id: int, state: LeaseState = LeaseState.FETCHING) -> Request:
    request = Request(f"http://a.example/{lease_id}")
    leases.hold(Lease(0, lease_id), request, state)
    return request


async def test_a_requeue_gives_the_url_back_once_and_acks_nothing() -> None:
    scheduler, leases = book()
    request = claimed(leases, 1)
    answered = asyncio.get_running_loop().time()
    deferred = RobotsDeferred(
        "slot used for robots.txt", requeue=Requeue(2.0, answered, 0.05, throttled=True)
    )
    leases.failed(request, deferred)  # the ack middleware
    leases.failed(request, deferred)  # then the spider's errback: nothing more
    assert leases.state_of(request) is None and scheduler.outbox.pending_acks == []
    [release] = leases.pending_releases
    assert (release.lease, release.requeue, release.contacted) == (Lease(0, 1), True, True)
    assert (release.hold_ms, release.fetch_ms, release.throttled) == (2000, 50, True)
    assert scheduler.stats.get_value("frontier/deferred") == 1


async def test_without_its_slot_a_requeued_url_is_finished() -> None:
    scheduler, leases = book()
    request = claimed(leases, 2, LeaseState.DOWNLOADED)
    leases.failed(request, RobotsDeferred("Redis error", requeue=Requeue(5.0)))
    assert leases.pending_releases == []
    assert [(m, lease.id) for m, lease in scheduler.outbox.pending_acks] == [("done", 2)]
    assert scheduler.stats.get_value("frontier/outcome/failed") == 1


async def test_unfetched_frees_the_slot_at_once_then_finishes() -> None:
    scheduler, leases = book()
    refusals: list[BaseException] = [
        RobotsForbidden("Forbidden by robots.txt", unfetched=True),
        RobotsUnreachable("robots.txt unreachable", unfetched=True),
        BlockedAddress("10.0.0.1", "private"),  # the guard's, recognised as such
    ]
    for i, exc in enumerate(refusals, 1):
        leases.failed(claimed(leases, i), exc)
    releases = leases.pending_releases
    assert [r.lease.id for r in releases] == [1, 2, 3]
    assert not any(r.contacted or r.requeue for r in releases)
    assert [lease.id for _, lease in scheduler.outbox.pending_acks] == [1, 2, 3]
    assert len(leases) == 0


async def test_a_contacted_host_or_a_plain_failure_is_only_finished() -> None:
    scheduler, leases = book()
    # robots.txt was fetched on this slot (a contact): no early release.
    leases.failed(claimed(leases, 1), RobotsForbidden("Forbidden", unfetched=False))
    leases.failed(claimed(leases, 2), IgnoreRequest("redirect loop"))
    spider_has_it = claimed(leases, 3, LeaseState.SCRAPING)  # an HttpError: the spider acks it
    leases.failed(spider_has_it, IgnoreRequest("HttpError"))
    assert leases.pending_releases == []
    assert [lease.id for _, lease in scheduler.outbox.pending_acks] == [1, 2]
    assert leases.state_of(spider_has_it) is LeaseState.SCRAPING


async def test_a_paused_engine_hands_its_claims_back_with_no_delay_charged(
    make_frontier: MakeFrontier,
) -> None:
    """A worker whose engine is paused (a full spool, or an operator) gives
    the claimed URLs still in its buffer back at once: no ack, a release that
    requeues them and says the host was not contacted, so another worker
    claims the same URLs right away though every host's delay is a minute."""
    scheduler, leases = book()
    f = await make_frontier(shards=4, delay_ms=60_000, conc=1)
    urls = [f"http://127.0.0.{i}/page" for i in (2, 3, 4)]  # addresses: the gate admits at once
    canon, codec = UrlCanonicalizer([]), RequestCodec(["scrapy.http.request.Request"])
    entries = []
    for url in urls:
        canonical = canon.canonicalize(url)
        data = codec.encode(Request(url), None)
        entries.append(NewEntry(host_key(canonical), canon.fingerprint(canonical), False, data))
    await f.add(entries)
    claims = scheduler.claims
    got, _ = await claims.claim_some(f, "w1", 3, None)
    assert got == 3 and len(claims) == 3
    running = SimpleNamespace(paused=False)
    assert not claims.while_paused(running)  # type: ignore[arg-type]
    assert len(claims) == 3 and leases.pending_releases == []
    paused = SimpleNamespace(paused=True)
    assert claims.while_paused(paused)  # type: ignore[arg-type]
    assert len(claims) == 0 and len(leases) == 0
    releases = leases.pending_releases
    assert len(releases) == 3 and all(r.requeue and not r.contacted for r in releases)
    assert scheduler.outbox.pending_acks == []
    assert scheduler.stats.get_value("frontier/outcome/handed_back") == 3
    await leases.send_releases(f)
    again = [item for s in range(f.keys.shards) for item in (await f.claim(s, 10, "w2")).items]
    assert sorted(codec.decode(data, None).url for _, data in again) == urls
