"""Every lease ends on every path, whatever the spider: the engine's own end of
a request (crawlproject/frontier/scrapy_glue/engine_hooks.py) ends a lease nothing else
ended (LeaseBook.request_ended), once its last carrying request is done.

The real crawls, a spider with no errback failing in every way, are in
tests/test_lease_ends_crawl.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scrapy import Request

from crawlproject.frontier.claims.leases import LeaseState
from crawlproject.frontier.store.operation_values import Lease
from tests.test_lease_outcomes import book, claimed


async def test_a_failure_nothing_acked_is_finished_when_the_engine_is_done() -> None:
    scheduler, leases = book()
    failed = claimed(leases, 1, LeaseState.DOWNLOADED)  # e.g. REDIRECT_MAX_TIMES, no errback
    never_sent = claimed(leases, 2)  # a process_request failure past the ack middleware
    spider_had_it = claimed(leases, 3, LeaseState.SCRAPING)
    for request in (failed, never_sent, spider_had_it):
        leases.request_ended(request, {request})
    assert len(leases) == 0
    assert [(m, lease.id) for m, lease in scheduler.outbox.pending_acks] == [
        ("done", 1),
        ("done", 2),
        ("done", 3),
    ]
    stats = scheduler.stats
    assert stats.get_value("frontier/lease_ended/failed") == 1
    assert stats.get_value("frontier/lease_ended/not_downloaded") == 1
    assert stats.get_value("frontier/lease_ended/unacked") == 1
    assert stats.get_value("frontier/outcome/failed") == 2
    assert stats.get_value("frontier/outcome/spider_error") == 1
    assert leases.pending_releases == []  # the ack itself frees a slot still held


async def test_the_last_carrier_ends_it_and_an_ended_lease_is_left_alone() -> None:
    scheduler, leases = book()
    request = claimed(leases, 1, LeaseState.DOWNLOADED)
    # A copy downloaded through the engine by a middleware, carrying the token.
    copy = request.replace(url="http://a.example/1?variant")
    leases.request_ended(copy, {request, copy})
    assert leases.state_of(request) is LeaseState.DOWNLOADED
    leases.request_ended(request, {request})
    assert leases.state_of(request) is None
    assert [lease.id for _, lease in scheduler.outbox.pending_acks] == [1]

    scraped = claimed(leases, 2, LeaseState.SCRAPING)
    leases.done(scraped, "scraped")  # the ack middleware, before the engine is done
    leases.request_ended(scraped, {scraped})
    leases.request_ended(Request("http://a.example/robots.txt"), set())  # carries none
    assert [lease.id for _, lease in scheduler.outbox.pending_acks] == [1, 2]
    assert scheduler.stats.get_value("frontier/outcome/scraped") == 1
    assert scheduler.stats.get_value("frontier/lease_ended/unacked") is None


async def test_a_redirect_stored_before_its_parent_ends_leaves_nothing_to_end() -> None:
    scheduler, leases = book()
    request = claimed(leases, 1, LeaseState.DOWNLOADED)
    hop = request.replace(url="http://a.example/moved")  # RedirectMiddleware's new request
    token, parent = leases.take_parent(hop)  # the scheduler stores it...
    leases.hand_over(token, parent)  # ...and the old lease is done as moved
    leases.request_ended(request, {request})
    assert [(m, lease.id) for m, lease in scheduler.outbox.pending_acks] == [("moved", 1)]
    assert scheduler.stats.get_value("frontier/lease_ended/failed") is None


class _RenewingFrontier:
    """The frontier's renew as Redis answers it when an ack lands first: the
    lease is gone from ``leases``. While the call is on its way the worker
    ends the lease itself (the write loop acks it)."""

    def __init__(self, on_call: Callable[[], None], gone: list[Lease]) -> None:
        self.on_call, self.gone = on_call, gone

    async def renew(self, leases: Sequence[Lease]) -> list[Lease]:
        self.on_call()
        return self.gone


async def test_a_lease_ended_during_its_renewal_is_not_lost() -> None:
    scheduler, leases = book()
    acked = claimed(leases, 1, LeaseState.SCRAPING)
    stalled = claimed(leases, 2)

    def end_one() -> None:
        leases.done(acked, "scraped")

    frontier = _RenewingFrontier(end_one, [Lease(0, 1), Lease(0, 2)])
    lost = await leases.renew(frontier)  # type: ignore[arg-type]
    # Lease 1 was acked by this worker, lease 2 expired and was reclaimed.
    assert lost == {Lease(0, 2).token}
    assert scheduler.stats.get_value("frontier/leases_lost") == 1
    assert leases.state_of(stalled) is None
