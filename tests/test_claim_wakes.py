"""A host a worker just fetched is claimed again as soon as its release is in
Redis, not at the next idle poll (crawlproject/frontier/claims/claims.py, ClaimClock).

The claim that a freed slot triggers races the release on its way to Redis:
run first, it finds the host still held and its shard with nothing. With 32
shards such a shard waited its turn among the empty shards' probes (up to
shards / PROBES_PER_POLL idle polls), and a wake that came while a claim round
was on its way was undone by the round's own idle wait: on loopback with no
delay, two workers on two hosts waited 0.2-0.4 s (one idle poll) after about
one fetch in thirty (bench: BENCHMARKS.md, "one host's next fetch").
"""

from __future__ import annotations

import math

from crawlproject.frontier.claims.claim_clock import ClaimClock

SHARDS = 32


def settled(clock: ClaimClock, now: float) -> None:
    """Every shard asked once and found with nothing (an idle crawl); the
    empty shards' next probe is one poll later (0.2 s: the times below are
    before it)."""
    ask, _ = clock.to_ask(SHARDS, now)
    assert ask == list(range(SHARDS))
    for shard in ask:
        clock.claimed(shard, None, now, clock.mark(shard), got=0)


def test_a_claim_that_ran_before_the_release_landed_is_asked_again_when_it_lands() -> None:
    clock = ClaimClock(poll=0.2)
    settled(clock, now=0.0)
    clock.slot_freed(7, due=0.05)  # the fetch of shard 7's host ended; its release is queued
    ask, _ = clock.to_ask(SHARDS, now=0.05)
    assert ask == [7]  # asked at once (Redis may run the release first)
    mark = clock.mark(7)
    clock.claimed(7, None, now=0.051, mark=mark, got=0)  # Redis ran the claim first
    assert clock.to_ask(SHARDS, now=0.052)[0] == []  # nothing to ask until the release lands
    clock.released(7, due=0.05)  # the release is in Redis
    ask, _ = clock.to_ask(SHARDS, now=0.053)
    assert ask == [7]


def test_a_reply_that_left_before_the_slot_was_freed_does_not_mark_the_shard_empty() -> None:
    clock = ClaimClock(poll=0.2)
    settled(clock, now=0.0)
    clock.slot_freed(7, due=0.05)
    mark = clock.mark(7)  # a claim of shard 7 on its way...
    clock.slot_freed(7, due=0.051)  # ...when another fetch there ends
    assert clock.claimed(7, None, now=0.07, mark=mark, got=0)  # stale: asked again
    assert clock.to_ask(SHARDS, now=0.07)[0] == [7]


def test_a_claim_that_took_the_host_is_not_repeated_when_the_release_lands() -> None:
    clock = ClaimClock(poll=0.2)
    settled(clock, now=0.0)
    clock.slot_freed(7, due=0.05)
    mark = clock.mark(7)
    clock.released(7, due=0.05)  # the release landed first...
    assert not clock.claimed(7, None, now=0.06, mark=mark, got=1)  # ...and the claim took the host
    clock.released(7, due=0.05)  # a later release of the same shard's batch
    assert clock.to_ask(SHARDS, now=0.07)[0] == []  # no claim that would find nothing


def test_a_wake_during_a_claim_round_is_not_undone_by_the_rounds_idle_wait() -> None:
    clock = ClaimClock(poll=0.2)
    settled(clock, now=0.0)
    clock.woken_due = math.inf  # a round starts (ClaimBuffer.claim_some)
    clock.slot_freed(7, due=1.0)  # a fetch ends while the round is on its way
    assert clock.round_wait(0.2, now=1.005) == 0.0  # the next round at once, not a poll later
    clock.new_urls({9}, now=1.1)
    assert clock.round_wait(0.2, now=1.2) == 0.0
    assert clock.round_wait(0.2, now=1.3) == 0.2  # no wake: the round's own wait
    clock.slot_freed(5, due=1.45)  # a host due later (its delay)
    assert math.isclose(clock.round_wait(0.2, now=1.4), 0.05)
