"""An exact copy's dropped items never take its page out of the archive
(issue 44 item 1: the dedupe verdict decides what happens to items, never what
the archive keeps).

A user's spider (tests/spiders_for_tests/archiving.py: not ``web``) yields an
item per page carrying the page's response for the store, then the page's
links, on a site where two URLs serve byte-identical bodies: the seed
``/a.html`` links to ``/b.html``. With ``CRAWL_DEDUPE_DROP_ITEMS`` on (the
default) the duplicate filter drops ``/b.html``'s items before any pipeline
(middlewares/dedupe.py), and the storage pipeline still writes its page (the
``dropped_item_response`` signal, crawlproject/store/signals.py): a revisit of
``/a.html``'s stored response (``identical-payload-digest``), with its request
record; ``warcio check`` passes. A page is written once however many of its
items (kept or dropped) carried it. Without a store, the items are dropped and
nothing else happens.

``/b.html`` is answered only once the fleet's index of stored payloads holds
``/a.html``'s body (crawlproject/store/revisits.py): the copy's page, written
as soon as it is judged, would otherwise be stored whole and ``/a.html``'s,
whose item may still be on its way to the store, become the revisit.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import redis

from crawlproject.body_digest import payload_digest
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.store.revisits import FIELD_BYTES, IDENTICAL_PAYLOAD_DIGEST
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb, host_ip
from tests.test_archive_recrawl import answers, records

CRAWL = "dropped-archive"
SETTINGS = {
    "CRAWL_HOST_DELAY": 0.02, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
}  # fmt: skip
SAME = (
    '<html><head><title>Same</title></head><body><p><a href="/b.html">the copy</a> '
    + "served twice " * 200
    + "</p></body></html>"
)
SPECIAL = {1: {p: {"body": SAME, "content_type": "text/html"} for p in ("/a.html", "/b.html")}}


def crawl(
    redis_url: str, web: TestWeb, tmp_path: Path, settings: dict[str, object], per_page: int = 1
) -> tuple[dict[str, int], list[dict[str, object]], Path]:
    client = redis.Redis.from_url(redis_url)
    keys, sha1 = CrawlKeys(CRAWL, NEW_CRAWL_SHARDS), hashlib.sha1(SAME.encode()).digest()
    field = sha1[:FIELD_BYTES]
    index_key = keys.payload_digests(int.from_bytes(field[:4], "big") % keys.shards)
    store = settings.get("CRAWL_STORE_ENABLED", True)
    # Without a store there is no index: then the copy is answered at once.
    web.hold[host_ip(1)] = lambda path: (
        path != "/b.html" or not store or bool(client.hexists(index_key, field))
    )
    data, out = tmp_path / "data", tmp_path / "items.jsonl"
    try:
        proc = start_worker(
            REPO_ROOT, redis_url, CRAWL, [web.base_url(1) + "a.html"],
            {**SETTINGS, **settings, "CRAWL_DATA_DIR": str(data)}, tmp_path / "w.log",
            extra_args=["-a", f"per_page={per_page}", "-O", str(out)], spider="archiving",
        )  # fmt: skip
        wait_all([proc], timeout=120)
    finally:
        client.close()
    items = [json.loads(line) for line in out.read_text().splitlines()]
    return stats_of(proc.log_path), items, data / "bodies" / CRAWL / "warc"


def test_an_exact_copys_dropped_items_leave_its_page_in_the_archive_as_a_revisit(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=1, links=0, cross_links=0, special=SPECIAL)
    stats, items, warc_dir = crawl(redis_url, web, tmp_path, {})
    first, copy = web.base_url(1) + "a.html", web.base_url(1) + "b.html"
    # The user's setting holds: the copy's item is dropped, the first URL's kept.
    assert stats["dedupe/checked/exact"] == 1 and stats["dedupe/items_dropped"] == 1
    [item] = items
    assert item["url"] == first
    stored = ("payload_digest", "fetched_at", "final_url", "warc_file", "warc_offset")
    assert set(item) == {"url", "title", "n", *stored, "warc_length"}, item
    # Both URLs are archived: the original whole, the copy a revisit naming it.
    files = sorted(warc_dir.glob("*.warc.gz"))
    found = answers(files)  # each URL once
    assert set(found) == {first, copy}
    original, revisit = found[first], found[copy]
    assert original.type == "response" and revisit.type == "revisit"
    assert revisit.headers["WARC-Profile"] == IDENTICAL_PAYLOAD_DIGEST
    assert revisit.headers["WARC-Refers-To-Target-URI"] == first
    assert revisit.headers["WARC-Refers-To-Date"] == original.date
    assert revisit.headers["WARC-Payload-Digest"] == payload_digest(SAME.encode())
    assert revisit.status == "200"
    # Each answer beside its request record.
    requests = {r.concurrent_to: r.url for r in records(files) if r.type == "request"}
    assert requests == {original.record_id: first, revisit.record_id: copy}
    assert stats["store/pages"] == 1 and stats["store/revisits/identical_payload_digest"] == 1
    for path in files:
        check = subprocess.run(
            [sys.executable, "-m", "warcio.cli", "check", str(path)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout


def test_a_page_is_written_once_however_many_items_carried_it(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """Three items a page: the kept page's and the dropped copy's each written
    once (one fetch, one record); every kept item names that one record."""
    web = testweb_factory(hosts=1, pages=1, links=0, cross_links=0, special=SPECIAL)
    stats, items, warc_dir = crawl(redis_url, web, tmp_path, {}, per_page=3)
    assert stats["dedupe/items_dropped"] == 3 and len(items) == 3
    first, copy = web.base_url(1) + "a.html", web.base_url(1) + "b.html"
    written = records(sorted(warc_dir.glob("*.warc.gz")))
    assert sorted(r.type for r in written if r.url == copy) == ["request", "revisit"]
    assert sorted(r.type for r in written if r.url == first) == ["request", "response"]
    assert stats["store/pages"] == 1 and stats["store/revisits/identical_payload_digest"] == 1
    where = {(i["warc_file"], i["warc_offset"], i["warc_length"], i["fetched_at"]) for i in items}
    assert len(where) == 1 and sorted(i["n"] for i in items) == [0, 1, 2], items


def test_without_a_store_the_copys_items_are_dropped_and_nothing_is_written(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=1, links=0, cross_links=0, special=SPECIAL)
    stats, items, warc_dir = crawl(redis_url, web, tmp_path, {"CRAWL_STORE_ENABLED": False})
    assert stats["dedupe/items_dropped"] == 1 and len(items) == 1
    assert not any(k.startswith("store/") for k in stats)
    assert not warc_dir.exists()
