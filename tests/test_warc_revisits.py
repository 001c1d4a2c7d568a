"""The fleet's index of stored payloads (crawlproject/store/revisits.py) on a
real redis-server, and the revisit records the WARC writer makes of it,
checked by ``warcio check`` and indexed as ``cdxj-indexer`` indexes them."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from warcio.archiveiterator import ArchiveIterator

from crawlproject.body_digest import payload_digest
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.round_trips import MAX_CALLS
from crawlproject.store.config import BodyStoreConfig
from crawlproject.store.index import index_bytes
from crawlproject.store.revisits import (
    IDENTICAL_PAYLOAD_DIGEST,
    SERVER_NOT_MODIFIED,
    LocalRevisitIndex,
    PayloadIndex,
    RevisitIndex,
    encode_value,
)
from crawlproject.store.warc import HttpExchange, Revisit, RollingWarcWriter
from crawlproject.store.writers import PageToStore, WarcBodyWriter
from testkit.redis_cluster import RedisCluster
from tests.test_pywb_replay import CDXJ_INDEXER

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
FIELDS = "warc-type,warc-profile,warc-refers-to-target-uri,warc-refers-to-date,warc-payload-digest"
T1 = datetime(2026, 2, 3, 4, 5, 6, 7, tzinfo=UTC)


async def test_two_workers_storing_one_payload_at_once_write_one_original(redis_url: str) -> None:
    keys = CrawlKeys("rv", 4)
    clients = [Redis.from_url(redis_url) for _ in range(8)]
    try:
        indexes = [RevisitIndex(c, keys) for c in clients]
        sha1 = hashlib.sha1(b"one body").digest()
        urls = [f"http://h{i}.test/page" for i in range(8)]
        found = await asyncio.gather(
            *(ix.claim(sha1, u, T0) for ix, u in zip(indexes, urls, strict=True))
        )
        firsts = [u for u, f in zip(urls, found, strict=True) if f is None]
        assert len(firsts) == 1  # one original, seven revisits naming it
        assert {(f.url, f.date, f.digest) for f in found if f is not None} == {
            (firsts[0], T0, payload_digest(b"one body"))
        }
        # A 304 finds it by the first 8 bytes (the recrawl state's digest).
        hit = await indexes[3].find(sha1[:8])
        assert hit is not None and (hit.url, hit.date) == (firsts[0], T0)
        # One key per shard, in the shard's hash tag (a cluster slot of the crawl's).
        stored = [k for k in await clients[0].keys("*") if k.endswith(b":wd")]
        assert [k.decode() for k in stored] == [
            keys.payload_digests(int.from_bytes(sha1[:4], "big") % 4)
        ]
    finally:
        for c in clients:
            await c.aclose()


async def index_semantics(index: PayloadIndex) -> None:
    a, b = hashlib.sha1(b"a").digest(), hashlib.sha1(b"b").digest()
    assert await index.claim(a, "http://x.test/a", T0) is None
    assert await index.claim(a, "http://x.test/a", T0) is None  # the same call again: ours
    again = await index.claim(a, "http://x.test/a", T1)
    assert again is not None and (again.url, again.date) == ("http://x.test/a", T0)
    # Another payload with the same first 8 bytes is stored whole, never a revisit of it.
    clash = a[:8] + bytes(12)
    assert await index.claim(clash, "http://x.test/c", T1) is None
    # An original whose write failed is taken out; only the one that claimed it can.
    assert await index.claim(b, "http://x.test/b", T0) is None
    await index.release(b, "http://x.test/other", T0)
    assert await index.find(b[:8]) is not None
    await index.release(b, "http://x.test/b", T0)
    assert await index.find(b[:8]) is None
    assert await index.claim(b, "http://x.test/b2", T1) is None


async def test_index_semantics_in_redis_and_in_process(redis_url: str) -> None:
    client = Redis.from_url(redis_url)
    try:
        await index_semantics(RevisitIndex(client, CrawlKeys("sem", 2)))
        sha1 = hashlib.sha1(b"a").digest()
        # What an entry costs: 8 bytes of field, 12 + 8 + the URL of value.
        value = encode_value(sha1, "http://x.test/a", T0)
        assert len(value) == 12 + 8 + len("http://x.test/a")
    finally:
        await client.aclose()
    await index_semantics(LocalRevisitIndex())


class CountedIndex(RevisitIndex):
    """The real index, counting its round trips of claims and their sizes."""

    rounds: list[int]

    async def _claim_many(self, claims: list[tuple[str, bytes, bytes]]) -> list[Any]:
        self.rounds = [*getattr(self, "rounds", []), len(claims)]
        return await super()._claim_many(claims)


async def test_claims_in_one_round_trip_lose_nothing_and_claim_once(redis_url: str) -> None:
    """A worker's claims of one window go in one round trip (MAX_CALLS of
    them at once, the window long): every one answered as if made alone, in
    order. Two copies of one payload in the batch: the first the original,
    the second a revisit of it; the first's call sent once (sent twice it
    would still answer ours, but the index would then hold two EVALSHAs)."""
    client = Redis.from_url(redis_url)
    try:
        await client.config_resetstat()
        index = CountedIndex(client, CrawlKeys("batch", 4), window_seconds=600)
        twin = hashlib.sha1(b"twin").digest()
        own = [hashlib.sha1(f"own {i}".encode()).digest() for i in range(MAX_CALLS - 2)]
        calls = [(twin, "http://a.test/twin", T0)]
        calls += [(sha1, f"http://o.test/{i}", T0) for i, sha1 in enumerate(own[:30])]
        calls += [(twin, "http://b.test/twin", T1)]
        calls += [(sha1, f"http://o.test/{i + 30}", T0) for i, sha1 in enumerate(own[30:])]
        found = await asyncio.wait_for(asyncio.gather(*(index.claim(*c) for c in calls)), 30)
        assert index.rounds == [MAX_CALLS]  # one round trip, not the window's wait
        copy = found.pop(31)
        assert copy is not None and (copy.url, copy.date) == ("http://a.test/twin", T0)
        assert copy.digest == payload_digest(b"twin")
        assert found == [None] * (MAX_CALLS - 1)  # the original and every other payload
        for i, sha1 in enumerate(own):
            hit = await index.find(sha1[:8])
            assert hit is not None and hit.url == f"http://o.test/{i}"
        stats = (await client.info("commandstats"))["cmdstat_evalsha"]
        # Each claim run once (the first round trip's NOSCRIPTs: sent again once loaded).
        assert stats["calls"] - stats["failed_calls"] == MAX_CALLS, stats
        # A window's few claims: one round trip once the window has passed.
        more = [hashlib.sha1(f"more {i}".encode()).digest() for i in range(3)]
        index.rounds, index._claims.window_seconds = [], 0.05
        found = await asyncio.gather(
            *(index.claim(s, f"http://m.test/{i}", T0) for i, s in enumerate(more)),
            index.claim(twin, "http://c.test/twin", T1),
        )
        assert index.rounds == [4]
        assert found[:3] == [None] * 3 and found[3] is not None
        assert found[3].url == "http://a.test/twin"
    finally:
        await client.aclose()


def test_revisit_records_pass_warcio_check_and_index_as_cdxj_indexer_does(tmp_path: Path) -> None:
    body = b"<html><body>the same bytes</body></html>"
    digest = payload_digest(body)
    headers = [("Content-Type", "text/html"), ("Content-Length", str(len(body)))]

    def exchange(
        url: str, when: datetime, revisit: Revisit | None = None, status: int = 200
    ) -> HttpExchange:
        return HttpExchange(
            url=url, method="GET", request_headers=[("If-None-Match", '"e"')], request_body=b"",
            status=status, reason="OK" if status == 200 else "Not Modified",
            response_headers=headers if status == 200 else [("ETag", '"e"')],
            body=body if status == 200 else b"", fetched_at=when, revisit=revisit,
        )  # fmt: skip

    same = Revisit(IDENTICAL_PAYLOAD_DIGEST, "http://a.test/", T0, digest)
    not_modified = Revisit(SERVER_NOT_MODIFIED, "http://a.test/", T0, digest, with_head=False)
    with RollingWarcWriter(tmp_path, "w") as writer:
        writer.write_exchanges(
            [
                exchange("http://a.test/", T0),
                exchange("http://b.test/", T1, same),
                exchange("http://a.test/", T1, not_modified, status=304),
            ]
        )
    [path] = tmp_path.glob("*.warc.gz")
    check = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", "-v", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout
    # warcinfo, a response and 3 requests: both digests recomputed; the 2 revisits'
    # block digests too (warcio leaves their payload digest, the original's).
    assert check.stdout.count("digest pass") == 5
    assert check.stdout.count("digest present but not checked (revisit)") == 2
    theirs = subprocess.run(
        [str(CDXJ_INDEXER), "--sort", str(path)], capture_output=True, check=True, timeout=60
    ).stdout
    assert index_bytes(path) == theirs
    raw = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "index", "-f", FIELDS, str(path)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert '"warc-profile": "http://netpreserve.org/warc/1.1/revisit/server-not-modified"' in raw
    assert raw.count('"warc-refers-to-date": "2026-01-02T03:04:05.678901Z"') == 2
    assert raw.count(f'"warc-payload-digest": "{digest}"') == 3


async def test_the_index_on_a_redis_cluster_spreads_over_the_shards_tags() -> None:
    cluster = RedisCluster().start()
    try:
        client = redis_client(cluster.url)
        try:
            keys = CrawlKeys("rvc", 8)
            index = RevisitIndex(client, keys)
            await index_semantics(index)
            bodies = [f"body {i}".encode() for i in range(64)]
            for i, body in enumerate(bodies):
                assert (
                    await index.claim(hashlib.sha1(body).digest(), f"http://c.test/{i}", T0) is None
                )
            for i, body in enumerate(bodies):
                found = await index.find(hashlib.sha1(body).digest()[:8])
                assert found is not None and found.url == f"http://c.test/{i}"
            shards = {int.from_bytes(hashlib.sha1(b).digest()[:4], "big") % 8 for b in bodies}
            assert len(shards) == 8  # 64 payloads reach every shard's key (and its slot)
        finally:
            await client.aclose()
    finally:
        cluster.stop()


def test_a_posts_request_record_keeps_its_body_beside_a_response_and_a_revisit(
    tmp_path: Path,
) -> None:
    """The storage pipeline's writer (a Scrapy response to a POST, as the
    pipeline hands it over): each answer's request record is the POST with
    its body, WARC-Concurrent-To the answer; a revisit's too."""
    form = b"a=1&b=\x00\xff"
    body = b"<html><body>posted</body></html>"
    config = BodyStoreConfig.from_settings(Settings({"CRAWL_DATA_DIR": str(tmp_path)}))
    writer = WarcBodyWriter(config, "post", "w1")
    finished: list[Path] = []
    writer.open(finished.append)

    def page(url: str, when: datetime, revisit: Revisit | None = None) -> PageToStore:
        request = Request(url, method="POST", body=form, headers={"Content-Type": "x"})
        response = HtmlResponse(url, body=body, headers={"Content-Type": "text/html"},
                                request=request)  # fmt: skip
        return PageToStore(response, "text/html", when, payload_digest(body), revisit=revisit)

    same = Revisit(IDENTICAL_PAYLOAD_DIGEST, "http://a.test/f", T0, payload_digest(body))
    writer.write_page(page("http://a.test/f", T0))
    writer.write_page(page("http://b.test/f", T1, same))
    writer.close()
    [path] = finished
    check = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", str(path)], capture_output=True, timeout=60
    )
    assert check.returncode == 0, check.stdout
    answers, requests = {}, []
    with open(path, "rb") as stream:
        for record in ArchiveIterator(stream):
            h = record.rec_headers
            if record.rec_type in ("response", "revisit"):
                answers[h.get_header("WARC-Record-ID")] = h.get_header("WARC-Target-URI")
            elif record.rec_type == "request":
                line = record.http_headers.protocol + " " + record.http_headers.statusline
                requests.append(
                    (h.get_header("WARC-Concurrent-To"), h.get_header("WARC-Target-URI"), line,
                     record.content_stream().read())
                )  # fmt: skip
    assert sorted(answers.values()) == ["http://a.test/f", "http://b.test/f"]
    assert sorted((answers[to], url, line, sent) for to, url, line, sent in requests) == [
        ("http://a.test/f", "http://a.test/f", "POST /f HTTP/1.1", form),
        ("http://b.test/f", "http://b.test/f", "POST /f HTTP/1.1", form),
    ]
