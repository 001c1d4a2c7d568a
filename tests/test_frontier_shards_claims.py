"""Claims over many fine-grained shards (crawlproject/frontier/claims/claims.py): every
URL handed out once, and a claim's cost that does not grow with the shard
count (a shard known empty is not asked again until this worker adds, frees a
slot or reclaims there, or its probe comes: PROBES_PER_POLL per idle poll)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from redis.asyncio import Redis
from scrapy import Request
from scrapy.utils.test import get_crawler

from crawlproject.frontier.basics.request_meta import LEASE_META_KEY
from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.claims.claim_clock import PROBES_PER_POLL, ClaimClock
from crawlproject.frontier.claims.claims import ClaimBuffer
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import NewEntry
from crawlproject.frontier.store.redis_frontier import ClaimBatch, RedisFrontier


class CountingFrontier(RedisFrontier):
    """The real frontier, counting its claim calls per shard."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.claim_calls: Counter[int] = Counter()

    async def claim(self, shard: int, max_n: int, worker: str) -> ClaimBatch:
        self.claim_calls[shard] += 1
        return await super().claim(shard, max_n, worker)


def claim_buffer() -> ClaimBuffer:
    crawler = get_crawler(
        settings_dict={
            "SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler",
            "CRAWL_IDLE_POLL_SECONDS": 0.05,
            # The claim alone (the address step's places are released by the
            # release path, not exercised here).
            "CRAWL_ADDRESS_CONCURRENCY": 0,
        }
    )
    assert crawler.stats is not None
    crawler.stats.open_spider()
    return FrontierScheduler.from_crawler(crawler).claims


def entries(urls: list[str]) -> list[NewEntry]:
    canon, codec = UrlCanonicalizer([]), RequestCodec(["scrapy.http.request.Request"])
    out = []
    for url in urls:
        canonical = canon.canonicalize(url)
        data = codec.encode(Request(url), None)
        out.append(NewEntry(host_key(canonical), canon.fingerprint(canonical), False, data))
    return out


@pytest.mark.parametrize("shards", [64, 256])
async def test_claims_over_many_shards_hand_out_every_url_once(redis_url: str, shards: int) -> None:
    """Three workers' claim buffers (each its own clock) over a crawl of 40
    hosts on many shards (most shards empty, the others thin): every URL is
    handed out once; claim calls per URL stay bounded; once all is claimed an
    idle worker asks at most PROBES_PER_POLL shards per poll, not every shard."""
    urls = [
        f"http://127.0.1.{h + 1}/p{p}" for h in range(40) for p in range(5)
    ]  # addresses: no DNS
    clients = [Redis.from_url(redis_url) for _ in range(3)]
    frontiers = [CountingFrontier(c, CrawlKeys("many", shards), 0, 1, 30_000) for c in clients]
    for f in frontiers:
        await f.prepare()
    await frontiers[0].add(entries(urls))
    buffers = [claim_buffer() for _ in frontiers]
    handed: list[str] = []

    async def work(i: int) -> None:
        f, buffer = frontiers[i], buffers[i]
        idle_rounds = 0
        while idle_rounds < 5:
            got, wait = await buffer.claim_some(f, f"w{i}", 4, None)
            if not got:
                idle_rounds += 1
                await asyncio.sleep(max(wait, 0.01))
                continue
            idle_rounds = 0
            while (request := buffer.pop()) is not None:
                assert LEASE_META_KEY in request.meta
                handed.append(request.url)
            leases = buffer.leases.take_all()
            assert len(leases) == got
            await f.ack(leases)  # done: the host's slot is free again
            for lease in leases:
                buffer.clock.slot_freed(lease.shard, 0.0)

    await asyncio.gather(*(work(i) for i in range(3)))
    assert Counter(handed) == Counter(urls)  # every URL once, none twice
    counters = await frontiers[0].counters()
    assert counters.get("queued", 0) == 0 and counters.get("leased", 0) == 0
    calls = sum(sum(f.claim_calls.values()) for f in frontiers)
    # A first look at each shard per worker, then calls that find work, the
    # probes of the idle rounds and races between the three.
    assert calls <= 3 * shards + 3 * len(urls), calls
    # Idle: the next polls ask at most PROBES_PER_POLL known-empty shards each.
    f, buffer = frontiers[0], buffers[0]
    before = sum(f.claim_calls.values())
    for _ in range(6):
        await asyncio.sleep(buffer.clock.poll)
        got, _ = await buffer.claim_some(f, "w0", 4, None)
        assert got == 0
    idle_calls = sum(f.claim_calls.values()) - before
    assert idle_calls <= 6 * PROBES_PER_POLL, idle_calls
    for c in clients:
        await c.aclose()


def test_the_clock_skips_empty_shards_until_told_and_probes_a_few_per_poll() -> None:
    clock = ClaimClock(poll=1.0)
    ask, _ = clock.to_ask(8, now=0.0)
    assert ask == list(range(8))  # never asked: all at once
    for shard in range(8):
        clock.claimed(shard, None if shard != 3 else 5.0, now=0.0)
    ask, wait = clock.to_ask(8, now=0.5)
    assert ask == [] and wait == pytest.approx(0.5)  # the probe is due at 1.0
    clock.new_urls({6}, now=0.5)  # an add there
    clock.slot_freed(2, due=0.7)  # a slot freed there
    ask, _ = clock.to_ask(8, now=0.8)
    assert ask == [2, 6]
    ask, _ = clock.to_ask(8, now=1.0)  # the probe's turn: the oldest empty shards
    assert ask[:2] == [2, 6] and set(ask[2:]) <= {0, 1, 4, 5, 7}
    assert len(ask[2:]) <= PROBES_PER_POLL
    clock.new_urls({3}, now=1.0)  # shard 3's host is due at 5.0: looked at within a poll
    assert clock.shard_ready[3] == pytest.approx(2.0)
