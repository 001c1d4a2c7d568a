"""The host queues as the scripts store them (queue layout bands4, keys.py):
compact entries, band masks, due lists and their stale entries, credit mode's
ZSET, a bands3 crawl's queues read and upgraded, and the refusal of an older
layout. A real redis-server, no HTTP."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider

from crawlproject.frontier.basics.urls import UrlCanonicalizer, host_key
from crawlproject.frontier.store.codec import RequestCodec, whole_form
from crawlproject.frontier.store.redis_frontier import (
    FrontierMismatch,
    NewEntry,
    RedisFrontier,
    Release,
)
from crawlproject.frontier.store.script_replies import reply_bytes
from testkit.frontier_sim import claim_one, entry
from tests.conftest import MakeFrontier

CANON = UrlCanonicalizer([])
CODEC = RequestCodec(["scrapy.http.request.Request"])


class _Spider(Spider):
    name = "web"

    def parse(self, response: object) -> None: ...

    def on_error(self, failure: object) -> None: ...


SPIDER = _Spider()


def link(url: str, depth: int) -> NewEntry:
    """A link as the web spider makes it (callbacks, depth, its own scope)."""
    canonical = CANON.canonicalize(url)
    request = Request(
        url,
        callback=SPIDER.parse,
        errback=SPIDER.on_error,
        meta={"depth": depth, "crawl_scope": host_key(canonical)},
    )
    return NewEntry(
        host_key(canonical),
        CANON.fingerprint(canonical),
        False,
        CODEC.encode(request, SPIDER),
        score=float(depth),
    )


@pytest.fixture
def make(make_frontier: MakeFrontier) -> MakeFrontier:
    async def build(crawl: str = "q", mode: str = "score", delay_ms: int = 0) -> RedisFrontier:
        return await make_frontier(
            crawl=crawl, shards=1, delay_ms=delay_ms, lease_ms=10_000, priority_mode=mode
        )

    return build


async def test_a_link_is_stored_as_its_path_and_depth(make: MakeFrontier) -> None:
    f = await make()
    await f.add([link("http://a.test:8080/x/page.html", 3)])
    # A small host keeps its bands in one list (_queue.lua).
    stored = await f.redis.lrange(f.keys.queue(0, "a.test:8080"), 0, -1)
    # tag g: parse, on_error, its own scope, after http:// + the host key + "/"; depth 3
    assert stored == [b"g3x/page.html"]
    batch = await f.claim(0, 10, "w")
    (_, data), = batch.items  # fmt: skip
    request = CODEC.decode(data, SPIDER)
    assert request.url == "http://a.test:8080/x/page.html"
    assert request.meta == {"depth": 3, "crawl_scope": "a.test:8080"}
    assert (request.callback, request.errback) == (SPIDER.parse, SPIDER.on_error)


@pytest.mark.parametrize("layout", ["bands1", "bands2", "bands5"])
async def test_a_crawl_of_an_older_queue_layout_is_refused(make: MakeFrontier, layout: str) -> None:
    f = await make(crawl=f"old-{layout}")
    # bands1: JSON requests and a due ZSET; bands2: band lists only, whose
    # workers would misread a small host's one list.
    await f.redis.hset(f.keys.meta, "queue_layout", layout)
    with pytest.raises(FrontierMismatch, match=rf"queue layout {layout}.*cannot read its queues"):
        await make(crawl=f"old-{layout}")


def bands3_form(item: bytes, key: str) -> bytes:
    """An entry of a small host's list as a bands3 worker (before 2026-12-08)
    stored it: markers byte 255 + band, the "/" after the key kept."""
    if item.isdigit():
        return bytes((255, int(item)))
    whole = whole_form(item, key)
    flags, how = whole[0] & 7, 2 if item[0] < 0x68 else 3  # after http:// / https:// + key
    depth = len(whole) - len(whole[1:].lstrip(b"0123456789"))
    start = whole.index(b"://") + 3 + len(key)
    return bytes((0x40 + flags + (how << 3),)) + whole[1:depth] + whole[start:]


async def test_a_bands3_crawls_small_host_list_is_read_and_goes_on(make: MakeFrontier) -> None:
    f = await make(crawl="b3")
    key = f.keys.queue(0, "a.test")
    await f.add([link("http://a.test/one", 1), link("https://a.test/three", 3)])
    await f.add([link("http://a.test/five", 5)])
    new = await f.redis.lrange(key, 0, -1)
    assert new == [b"g1one", b"3", b"o3three", b"5", b"g5five"]  # 2-byte markers, no "/"
    # The same list and meta as a bands3 worker of a running crawl left them.
    old = [bands3_form(e, "a.test") for e in new]
    assert old == [b"W1/one", b"\xff\x03", b"_3/three", b"\xff\x05", b"W5/five"]
    await f.redis.delete(key)
    await f.redis.rpush(key, *old)
    await f.redis.hset(f.keys.meta, "queue_layout", "bands3")
    g = await make(crawl="b3")  # a worker of this version joins: upgraded, never refused
    assert await g.redis.hget(g.keys.meta, "queue_layout") == b"bands4"
    # New URLs go to their bands' places, before the old markers too.
    await g.add([link("http://a.test/four", 4), link("http://a.test/two", 2)])
    await g.add([link("http://a.test/three-b", 3), link("http://a.test/2020/six", 6)])
    order = []
    while batch := (await g.claim(0, 1, "w")).items:
        (lease, data), = batch  # fmt: skip
        order.append(data)
        await g.ack([lease])
    urls = ["http://a.test/one", "http://a.test/two", "https://a.test/three",
            "http://a.test/three-b", "http://a.test/four", "http://a.test/five",
            "http://a.test/2020/six"]  # fmt: skip
    depths = [1, 2, 3, 3, 4, 5, 6]
    assert order == [link(u, d).data for u, d in zip(urls, depths, strict=True)]  # byte-identical


async def test_extreme_bands_keep_their_order(make: MakeFrontier) -> None:
    f = await make()
    # Band 31 is the mask's sign bit; band 0 its lowest.
    await f.add([entry("http://a.test/last", 40), entry("http://a.test/mid", 12)])
    await f.add([entry("http://a.test/first", -3)])
    order = []
    while got := await claim_one(f):
        order.append(got[1])
        await f.ack([got[0]])
    assert order == ["http://a.test/first", "http://a.test/mid", "http://a.test/last"]
    assert await f.redis.hget(f.keys.host(0, "a.test"), "qb") in (None, b"0")  # nothing queued


async def test_a_raised_host_is_claimed_once_and_its_stale_entry_skipped(
    make: MakeFrontier,
) -> None:
    f = await make()
    await f.add([entry("http://a.test/slow", 9), entry("http://b.test/1", 5)])
    # a is due in band 9; a better URL moves it to band 1 (its band-9 entry is stale).
    await f.add([entry("http://a.test/fast", 1)])
    prefix = f.keys.shard_prefixes[0]
    assert await f.redis.lrange(prefix + "due:9", 0, -1) == [b"a.test"]
    assert await f.redis.lrange(prefix + "due:1", 0, -1) == [b"a.test"]
    first = await f.claim(0, 10, "w")
    urls = [CODEC.decode(d, None).url for _, d in first.items]
    assert urls == ["http://a.test/fast", "http://b.test/1"]  # a once, its slot now taken
    assert await f.redis.llen(prefix + "due:9") == 0  # the stale entry went
    assert (await f.claim(0, 10, "w")).items == []
    await f.release([Release(lease, 0) for lease, _ in first.items])
    again = await f.claim(0, 10, "w")
    assert [CODEC.decode(d, None).url for _, d in again.items] == ["http://a.test/slow"]


async def test_one_claim_takes_many_due_hosts(make: MakeFrontier) -> None:
    f = await make()
    await f.add([entry(f"http://h{i}.test/") for i in range(100)])
    first = await f.claim(0, 64, "w")
    second = await f.claim(0, 64, "w")
    hosts = [host_key(CODEC.decode(d, None).url) for _, d in first.items + second.items]
    assert (len(first.items), len(second.items)) == (64, 36)
    assert sorted(hosts) == sorted(f"h{i}.test" for i in range(100))
    assert (await f.counters())["leased"] == 100


async def test_a_lease_released_twice_in_one_call_frees_one_slot(make: MakeFrontier) -> None:
    f = await make()
    await f.add([entry("http://a.test/1"), entry("http://a.test/2")])
    (lease, _), = (await f.claim(0, 10, "w")).items  # fmt: skip
    assert await f.release([Release(lease, 0), Release(lease, 0)]) == 1
    assert (await f.host_state("a.test"))["inflight"] == 0
    assert len((await f.claim(0, 10, "w")).items) == 1


async def test_dead_entries_keep_their_host(make: MakeFrontier) -> None:
    f = await make()
    await f.add([link("http://a.test/x", 1)])
    (lease, _), = (await f.claim(0, 10, "w")).items  # fmt: skip
    assert await f.ack([lease], "dead") == (1, 0)
    (dead,) = await f.redis.lrange(f.keys.shard_prefixes[0] + "dead", 0, -1)
    host, _, stored = reply_bytes(dead).partition(b"\t")
    assert host == b"a.test" and CODEC.decode(whole_form(stored, "a.test"), SPIDER).url == (
        "http://a.test/x"
    )


@pytest.mark.parametrize("mode", ["score", "credit"])
async def test_poisoned_urls_are_shown_whole(make: MakeFrontier, mode: str) -> None:
    f = await make(crawl=f"p{mode}", mode=mode)
    await f.add([link("https://a.test/p?q=1", 2)])
    prefix = f.keys.shard_prefixes[0]
    (lease, _), = (await f.claim(0, 10, "w")).items  # fmt: skip
    record = await f.redis.hget(prefix + "lease", str(lease.id))
    assert record is not None
    _, _, host, band, item = reply_bytes(record).split(b"\t", 4)
    await f.redis.rpush(prefix + "poison", host + b"\t" + band + b"\t" + item)
    assert await f.poisoned_urls() == ["https://a.test/p?q=1"]


async def test_credit_for_a_url_added_in_the_same_call_raises_it(make: MakeFrontier) -> None:
    f = await make(mode="credit")
    r = await f.add(
        [entry("http://a.test/new", 0.25), entry("http://a.test/new", 0.5, credit_only=True)]
    )
    assert (r.added, r.credited) == (1, 1)
    got = await claim_one(f)
    assert got is not None and got[2] == pytest.approx(0.75 * 0.9)
    # Credit for a URL not queued (claimed) goes to the lambda cash, not to a ghost entry.
    r = await f.add([entry("http://a.test/new", 0.5, credit_only=True)])
    assert r.credited == 0
    assert await f.redis.exists(f.keys.queue(0, "a.test")) == 0
    cash = float(await f.redis.hget(f.keys.shard_prefixes[0] + "aopic", "cash") or 0)
    assert cash == pytest.approx(0.075 + 0.5)


async def test_credit_mode_queue_is_a_zset_of_credit_units(make: MakeFrontier) -> None:
    f = await make(mode="credit")
    await f.add([entry("http://a.test/1", 0.5), entry("http://a.test/2", 2.0)])
    key = f.keys.queue(0, "a.test")
    fps = [CANON.fingerprint(f"http://a.test/{i}") for i in (1, 2)]
    assert [await f.redis.zscore(key, fp) for fp in fps] == [0.5e12, 2.0e12]  # 1e-12 units
    got = await claim_one(f)
    assert got is not None and got[1] == "http://a.test/2"  # the most credit first
