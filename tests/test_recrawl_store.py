"""The recrawl schedule in a real Redis: state writes, recrawl_promote.lua, the backlog."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from scrapy import Spider

from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.redis_frontier import RedisFrontier
from crawlproject.recrawl.schedule import FetchState, encode_state
from crawlproject.recrawl.store import RecrawlStore, StateWrite
from tests.conftest import MakeFrontier

CANON = UrlCanonicalizer([])
CODEC = RequestCodec(["scrapy.http.request.Request"])
NOW_S = int(time.time())


class _Spider(Spider):
    """Stored callbacks are names of this spider's methods."""

    name = "s"

    def parse(self, response: Any) -> None: ...

    def on_error(self, failure: Any) -> None: ...


def state_write(url: str, due_s: int, depth: int = 1, etag: str = '"e1"') -> StateWrite:
    canonical = CANON.canonicalize(url)
    state = FetchState(
        url=url, depth=depth, last_fetch_s=due_s - 3600, interval_s=3600, fetches=1,
        changes=0, gone=0, digest="0123456789abcdef", simhash="", etag=etag,
        last_modified="Thu, 01 Jan 2026 00:00:00 GMT",
    )  # fmt: skip
    return StateWrite(host_key(canonical), CANON.fingerprint(canonical), encode_state(state), due_s)


async def promote(store: RecrawlStore, **kw: object) -> tuple[int, int, int, int]:
    args: dict[str, object] = dict(
        shard=0, now_s=NOW_S, batch=100, max_queued=1000, default_delay_ms=0,
        default_concurrency=1, callback="parse", errback="on_error",
    )  # fmt: skip
    args.update(kw)
    r = await store.promote(**args)  # type: ignore[arg-type]
    return r.promoted, r.lost, r.due_left, r.oldest_due_s


async def drain(f: RedisFrontier) -> list[dict[str, object]]:
    """Every queued request's stored JSON, one claim at a time."""
    out: list[dict[str, object]] = []
    while True:
        batch = await f.claim(0, 1, "w")
        if not batch.items:
            return out
        lease, data = batch.items[0]
        out.append(json.loads(data))
        await f.ack([lease])


@pytest.fixture
async def frontier(make_frontier: MakeFrontier) -> RedisFrontier:
    return await make_frontier(crawl="rs", shards=1, delay_ms=0, lease_ms=10_000)


async def test_due_urls_are_queued_once_with_their_state(frontier: RedisFrontier) -> None:
    store = RecrawlStore(frontier.redis, frontier.keys)
    due = [state_write(f"http://a.test/p{i}", NOW_S - 60 + i, depth=i) for i in range(3)]
    later = state_write("http://b.test/later", NOW_S + 3600)
    await store.write([*due, later])
    assert await store.backlog(NOW_S) == type(await store.backlog(NOW_S))(4, 3, 60.0)
    assert await promote(store) == (3, 0, 0, 0)
    assert await promote(store) == (0, 0, 0, 0)  # gone from the schedule: queued once
    requests = await drain(frontier)
    assert [r["url"] for r in requests] == [f"http://a.test/p{i}" for i in range(3)]
    first = requests[0]
    assert first["callback"] == "parse" and first["errback"] == "on_error"
    assert first["dont_filter"] is True
    meta = first["meta"]
    assert isinstance(meta, dict)
    assert meta["depth"] == 0 and meta["handle_httpstatus_list"] == [304]
    assert meta["crawl_recrawl"] == due[0].state  # verbatim, for the worker
    # The codec turns it back into a Request the web spider can run.
    spider = _Spider()
    request = CODEC.decode(json.dumps(first).encode(), spider)
    assert request.url == "http://a.test/p0" and request.dont_filter
    assert request.callback == spider.parse and request.errback == spider.on_error
    assert request.meta["crawl_recrawl"] == due[0].state
    # The not-yet-due URL waits; --all takes it too.
    assert (await store.backlog(NOW_S)).tracked == 1
    assert await promote(store, everything=True) == (1, 0, 0, 0)


async def test_promotion_stops_at_the_frontier_size(frontier: RedisFrontier) -> None:
    store = RecrawlStore(frontier.redis, frontier.keys)
    await store.write([state_write(f"http://a.test/p{i}", NOW_S - 10) for i in range(10)])
    assert await promote(store, max_queued=4) == (4, 0, 6, NOW_S - 10)
    assert await promote(store, max_queued=4) == (0, 0, 6, NOW_S - 10)  # full: nothing
    assert len(await drain(frontier)) == 4
    assert await promote(store, max_queued=4, batch=3) == (3, 0, 3, NOW_S - 10)


async def test_a_schedule_entry_without_state_is_dropped_and_forget_removes_both(
    frontier: RedisFrontier,
) -> None:
    store = RecrawlStore(frontier.redis, frontier.keys)
    kept, orphan = (
        state_write("http://a.test/k", NOW_S - 5),
        state_write("http://a.test/o", NOW_S - 7200),
    )
    await store.write([kept, orphan])
    await frontier.redis.hdel(
        frontier.keys.shard_prefixes[0] + "fs:" + orphan.pkey, orphan.fingerprint
    )
    assert await promote(store) == (1, 1, 0, 0)
    await store.write([kept])
    await store.write([StateWrite(kept.pkey, kept.fingerprint, None)])
    assert await store.state(kept.pkey, kept.fingerprint) == (None, None)
    assert (await store.backlog(NOW_S)).tracked == 0


async def test_credit_mode_queues_a_recrawl_like_a_seed(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(crawl="rc", shards=1, delay_ms=0, priority_mode="credit")
    store = RecrawlStore(f.redis, f.keys)
    await store.write([state_write("http://a.test/x", NOW_S - 1)])
    assert await promote(store) == (1, 0, 0, 0)
    batch = await f.claim(0, 1, "w")
    assert len(batch.items) == 1 and batch.shares  # a credit share, as for a seed
    assert json.loads(batch.items[0][1])["url"] == "http://a.test/x"
