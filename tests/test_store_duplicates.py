"""``CRAWL_STORE_DUPLICATES`` (issue 44 item 1: "a setting narrows storage for
those who want less"): what the storage pipeline's chooser
(crawlproject/store/revisit_choice.py) writes for each kind of page in each
mode, with the fleet's index on a real redis-server and in the process.

The same sequence of pages in every mode: a first page; another URL with its
bytes that the duplicate filter judged an exact copy; a near copy (other
bytes, judged a copy); the first URL again with the same bytes (a page
without validators recrawled); its 304 to a conditional recrawl; an error
page with the first page's bytes. The archive test
(tests/test_archive_recrawl.py) runs the default mode end to end.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from crawlproject.default_settings import store as store_defaults
from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.recrawl.config import STATE_META_KEY
from crawlproject.recrawl.schedule import FetchState, encode_state
from crawlproject.store.config import BodyStoreConfig
from crawlproject.store.revisit_choice import Choice, RevisitChooser
from crawlproject.store.revisits import (
    IDENTICAL_PAYLOAD_DIGEST,
    SERVER_NOT_MODIFIED,
    LocalRevisitIndex,
    PayloadIndex,
    RevisitIndex,
)

T0 = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
SAME = b"<html><head><title>A</title></head><body>the first page</body></html>"
NEAR = b"<html><head><title>A</title></head><body>the first page!</body></html>"
A, B, C = "http://a.test/", "http://b.test/copy", "http://c.test/near"


def response(url: str, body: bytes, status: int = 200, state: str | None = None) -> HtmlResponse:
    meta = {STATE_META_KEY: state} if state is not None else {}
    return HtmlResponse(
        url, status=status, body=body, encoding="utf-8", request=Request(url, meta=meta)
    )


def state_of(body: bytes) -> str:
    """The recrawl state a 304's request carries: the digest of the URL's last 2xx body."""
    state = FetchState(
        url=A, depth=0, last_fetch_s=1, interval_s=60, fetches=1, changes=0, gone=0,
        digest=hashlib.sha1(body).hexdigest()[:16], simhash="", etag='"e"', last_modified="",
    )  # fmt: skip
    return encode_state(state)


async def sequence(index: PayloadIndex, mode: str) -> tuple[list[Choice], dict[str, int]]:
    stats = MemoryStatsCollector(get_crawler())
    chooser = RevisitChooser(index, mode, stats)
    same, near = hashlib.sha1(SAME).digest(), hashlib.sha1(NEAR).digest()
    t = [T0 + timedelta(seconds=i) for i in range(6)]
    choices = [
        await chooser.choose(response(A, SAME), same, t[0]),
        await chooser.choose(response(B, SAME), same, t[1], copy=True),
        await chooser.choose(response(C, NEAR), near, t[2], copy=True),
        await chooser.choose(response(A, SAME), same, t[3]),
        await chooser.choose(response(A, b"", 304, state_of(SAME)), b"", t[4]),
        await chooser.choose(response(A, SAME, 404), same, t[5]),
    ]
    found = stats.get_stats()
    return choices, {k: v for k, v in found.items() if k.startswith("store/")}


def indexes(redis: Redis) -> list[PayloadIndex]:
    return [RevisitIndex(redis, CrawlKeys("dup", 4)), LocalRevisitIndex()]


@pytest.mark.parametrize("where", ["redis", "process"])
async def test_revisit_the_default_archives_every_page(redis_url: str, where: str) -> None:
    assert store_defaults.CRAWL_STORE_DUPLICATES == "revisit"
    redis = Redis.from_url(redis_url)
    try:
        index = indexes(redis)[where == "process"]
        choices, stats = await sequence(index, "revisit")
    finally:
        await redis.aclose()
    first, copy, near, again, not_modified, error = choices
    assert first.store and first.revisit is None and first.claimed
    for revisit in (copy, again):  # the exact copy, the unchanged recrawl: the original named
        assert revisit.store and revisit.revisit is not None
        assert revisit.revisit.profile == IDENTICAL_PAYLOAD_DIGEST and revisit.revisit.with_head
        assert (revisit.revisit.refers_to_uri, revisit.revisit.refers_to_date) == (A, T0)
    assert near.store and near.revisit is None  # other bytes: whole, whatever the filter said
    assert not_modified.store and not_modified.revisit is not None
    assert not_modified.revisit.profile == SERVER_NOT_MODIFIED
    assert not not_modified.revisit.with_head  # replayed with the original's head
    assert (not_modified.revisit.refers_to_uri, not_modified.revisit.refers_to_date) == (A, T0)
    assert error.store and error.revisit is None  # an error page stays whole
    assert stats == {
        "store/revisits/identical_payload_digest": 2, "store/revisits/server_not_modified": 1
    }  # fmt: skip


@pytest.mark.parametrize("where", ["redis", "process"])
async def test_none_leaves_copies_unchanged_pages_and_304s_out(redis_url: str, where: str) -> None:
    redis = Redis.from_url(redis_url)
    try:
        choices, stats = await sequence(indexes(redis)[where == "process"], "none")
    finally:
        await redis.aclose()
    first, copy, near, again, not_modified, error = choices
    assert first.store and first.revisit is None
    assert [c.store for c in (copy, near, again, not_modified)] == [False] * 4
    assert error.store and error.revisit is None
    assert stats == {"store/duplicates_skipped": 4}


async def test_full_stores_every_body_whole_and_no_304() -> None:
    choices, stats = await sequence(LocalRevisitIndex(), "full")
    first, copy, near, again, not_modified, error = choices
    for choice in (first, copy, near, again, error):
        assert choice.store and choice.revisit is None and not choice.claimed
    assert not not_modified.store
    assert stats == {"store/duplicates_skipped": 1}


def test_the_setting_is_read_in_any_case_and_a_wrong_value_refused() -> None:
    def read(value: str) -> str:
        return BodyStoreConfig.from_settings(Settings({"CRAWL_STORE_DUPLICATES": value})).duplicates

    assert BodyStoreConfig.from_settings(Settings()).duplicates == "revisit"
    assert read(" None ") == "none" and read("FULL") == "full"
    with pytest.raises(ConfigError) as refused:
        read("some")
    assert str(refused.value) == (
        "CRAWL_STORE_DUPLICATES must be one of 'revisit', 'none', 'full', got 'some'"
    )
