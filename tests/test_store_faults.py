"""Faults around page-body storage, through real crawls: the S3 store gone for
20 s mid-crawl (a real moto_server, stopped and started again), a worker killed
with SIGKILL while its WARC file is open, and a torn ``.open`` file recovered."""

from __future__ import annotations

import ast
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from crawlproject.store.rolling import OPEN_SUFFIX
from crawlproject.store.warc import (
    RollingWarcWriter,
    WarcLocation,
    read_payload,
    recover_open_files,
)
from tests.support.crawlproc import (
    REPO_ROOT,
    WorkerProcess,
    crawl_status,
    start_worker,
    stats_of,
    stop_worker,
    wait_all,
    wait_until,
)
from tests.support.redis_server import RedisServer
from tests.support.s3_server import TEST_BUCKET, TEST_REGION, MotoServer
from tests.support.testweb import TestWeb

BUCKET = TEST_BUCKET
OUTAGE_SECONDS = 20.0
IDLE = {"CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}
SCRAPED = "Scraped from <"


def sent_bodies(web: TestWeb) -> dict[str, bytes]:
    """What the test web serves for each of its pages (the graph is fixed)."""
    return {
        web.base_url(h) + web.path_of(k).lstrip("/"): web.render(h, k)
        for h in range(1, web.hosts + 1)
        for k in range(web.page_count(h))
    }


def read_items(feed: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in feed.read_text().splitlines()]


def logged_items(log: Path) -> list[dict[str, Any]]:
    """The items a worker logged as scraped (LOG_LEVEL=DEBUG): Scrapy's
    "Scraped from <200 url>" line, then the item's repr on the next line. Only
    complete lines count: a killed worker may have cut its last one."""
    lines = log.read_text(errors="replace").split("\n")[:-1]
    return [ast.literal_eval(nxt) for line, nxt in pairwise(lines) if SCRAPED in line]


def payload_of(root: Path, item: dict[str, Any]) -> bytes:
    stored = read_payload(
        root / str(item["warc_file"]), int(item["warc_offset"]), int(item["warc_length"])
    )
    assert stored.url == item["url"] and stored.status == 200
    return stored.body


def spooled(data: Path) -> list[Path]:
    return sorted((data / "spool").rglob("*.warc.gz*"))


# --- 1. the S3 store away for 20 s mid-crawl ------------------------------------------


def download_all(client: Any, into: Path) -> set[str]:
    """Every object of the bucket into ``into`` (by key); their keys."""
    keys = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", ()):
            target = into / obj["Key"]
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(BUCKET, obj["Key"], str(target))
            keys.add(obj["Key"])
    return keys


def uploaded_keys(log: Path) -> set[str]:
    """Store keys the worker logged as uploaded ("<name> uploaded to s3://b/<key> (n bytes)")."""
    prefix = f"s3://{BUCKET}/"
    return {
        line.split(" uploaded to " + prefix, 1)[1].rsplit(" (", 1)[0]
        for line in log.read_text(errors="replace").splitlines()
        if " uploaded to " + prefix in line
    }


def test_s3_outage_mid_crawl_loses_nothing(
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    moto: MotoServer,
) -> None:
    # 4 hosts x 75 pages at ~0.47 s a page per host: the crawl lasts ~35 s, so
    # the outage (from ~4 s on) falls well inside it; 30 KB files finish every
    # ~15 pages (~1.5 s).
    web = testweb_factory(
        hosts=4, pages=75, latency_ms=20, links=2, cross_links=1, query_variants=0
    )
    data, feed, log = tmp_path / "data", tmp_path / "s3.jsonl", tmp_path / "s3.log"
    settings = {
        **IDLE, "CRAWL_HOST_DELAY": 0.4, "CRAWL_DEDUPE_ENABLED": False, "CRAWL_DATA_DIR": str(data),
        "CRAWL_STORE_ROTATE_BYTES": 30_000, "CRAWL_STORE_RETRY_ATTEMPTS": 1,
        "CRAWL_STORE_RETRY_BASE_SECONDS": 0.1, "CRAWL_STORE_CLOSE_TIMEOUT_SECONDS": 60,
        "CRAWL_STORE_URI": f"s3://{BUCKET}/bodies", "AWS_ENDPOINT_URL": moto.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION_NAME": TEST_REGION,
    }  # fmt: skip
    # Built before the outage: after the restart the bucket must be back at once,
    # or an upload in between meets NoSuchBucket (a refusal, retried only slowly).
    client = moto.client()
    proc = start_worker(
        REPO_ROOT, redis_server.url, "s3", web.seeds, settings, log, ["-O", str(feed)]
    )
    try:
        # Snapshot right after an upload: the next one is a file (~1.5 s) away,
        # so nothing lands in moto between the snapshot and the stop.
        wait_until(lambda: len(uploaded_keys(log)) >= 2 or proc.poll() is not None, timeout=30)
        seen = len(uploaded_keys(log))
        wait_until(lambda: len(uploaded_keys(log)) > seen or proc.poll() is not None, timeout=10)
        assert proc.poll() is None, "the crawl ended before the outage"
        snapshot = tmp_path / "snapshot"
        kept = download_all(client, snapshot)
        moto.stop()
        stopped_at = log.stat().st_size
        time.sleep(OUTAGE_SECONDS)
        # The fleet's status shows the storage lag the outage causes.
        lag = crawl_status(redis_server.url, "s3")["storage"]["files_waiting_for_upload"]
        # What moto forgot must all be in the snapshot, or the test lost it, not the crawler.
        assert uploaded_keys(log) <= kept, "an upload landed between the snapshot and the stop"
        assert proc.poll() is None, "the crawl ended during the outage: make it longer"
        moto.start()
        client.create_bucket(Bucket=BUCKET)
        during = log.read_bytes()[stopped_at:].decode(errors="replace")
        wait_all([proc], timeout=120)
    finally:
        stop_worker(proc, signal.SIGKILL)

    # During the outage the crawl went on: files finished, uploads failed and
    # were retried, the files stayed spooled.
    assert " unavailable (" in during and "kept in" in during
    assert "S3 upload" in during and "retry 1 of 1" in during
    assert during.count(".warc.gz finished") >= 2
    assert lag >= 2
    text = log.read_text(errors="replace")
    assert "Uploads to s3://" in text and "resumed after" in text

    after = tmp_path / "after"
    download_all(client, after)
    bodies = sent_bodies(web)
    items = read_items(feed)
    assert {i["url"] for i in items} == set(bodies) == web.expected_urls
    for item in items:
        key = Path("bodies", str(item["warc_file"]))
        root = snapshot if (snapshot / key).exists() else after
        assert payload_of(root / "bodies", item) == bodies[item["url"]]
    stats = stats_of(log)
    assert stats["store/pages"] == len(items)
    assert stats["store/files_spooled_at_close"] == 0
    assert not spooled(data)


# --- 2. a worker killed with SIGKILL while its WARC file is open -----------------------


def test_killed_worker_loses_no_stored_page(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=3, pages=25, latency_ms=10, links=2, cross_links=1, query_variants=0
    )
    data = tmp_path / "data"
    # Short leases: the killed worker's URLs come back to the second one quickly.
    settings = {
        **IDLE, "CRAWL_HOST_DELAY": 0.2, "CRAWL_DEDUPE_ENABLED": False, "CRAWL_DATA_DIR": str(data),
        "CRAWL_LEASE_SECONDS": 2, "LOG_LEVEL": "DEBUG",
    }  # fmt: skip
    first = start_worker(
        REPO_ROOT, redis_server.url, "kill", web.seeds, settings, tmp_path / "first.log"
    )
    second: WorkerProcess | None = None
    try:
        wait_until(lambda: len(logged_items(first.log_path)) >= 12 or first.poll() is not None)
        # The default rotation (1 GB) keeps the worker's one file open throughout.
        open_files = list((data / "spool").rglob(f"*{OPEN_SUFFIX}"))
        assert first.poll() is None and len(open_files) == 1
        stop_worker(first, signal.SIGKILL)
        first.wait()
        assert list((data / "spool").rglob(f"*{OPEN_SUFFIX}")) == open_files
        feed = tmp_path / "second.jsonl"
        second = start_worker(
            REPO_ROOT, redis_server.url, "kill", web.seeds, settings, tmp_path / "second.log",
            extra_args=["-O", str(feed)],
        )  # fmt: skip
        wait_all([second], timeout=60)
    finally:
        for proc in (first, second):
            if proc is not None:
                stop_worker(proc, signal.SIGKILL)

    bodies = sent_bodies(web)
    store_root = data / "bodies"
    killed = [i for i in logged_items(first.log_path) if i.get("warc_file")]
    assert len(killed) >= 12
    # Every page the killed worker reported stored is in the store, intact.
    for item in killed:
        assert payload_of(store_root, item) == bodies[item["url"]]
    killed_file = "kill/warc/" + open_files[0].name.removesuffix(OPEN_SUFFIX)
    assert {i["warc_file"] for i in killed} == {killed_file}
    later = read_items(feed)
    for item in later:
        assert payload_of(store_root, item) == bodies[item["url"]]
    assert {i["url"] for i in killed} | {i["url"] for i in later} == set(bodies)
    text = second.log_path.read_text(errors="replace")
    assert "Recovered 1 WARC file(s) a killed worker left" in text
    stats = stats_of(second.log_path)
    assert stats["store/files_uploaded"] == 2  # the recovered file and its own
    assert stats["store/files_spooled_at_close"] == 0
    assert not spooled(data)


def test_a_page_killed_in_the_pipelines_is_fetched_again(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # Scrapy runs item pipelines after the callback's output is consumed: the
    # URL must stay leased until its item has left them, or a worker killed in
    # between loses a page it fetched but never stored.
    web = testweb_factory(hosts=1, pages=3, latency_ms=0, links=2, cross_links=0, query_variants=0)
    data = tmp_path / "data"
    settings = {
        **IDLE, "CRAWL_HOST_DELAY": 0.05, "CRAWL_DATA_DIR": str(data), "CRAWL_LEASE_SECONDS": 2,
    }  # fmt: skip
    held = {
        **settings,
        "ITEM_PIPELINES": {
            "tests.spiders_for_tests.slow_pipeline.SlowPipeline": 50,
            "pipelines.dedupe.DedupePipeline": 100,
            "pipelines.store.BodyStorePipeline": 200,
        },
    }
    first = start_worker(REPO_ROOT, redis_server.url, "held", web.seeds, held, tmp_path / "1.log")
    try:
        wait_until(lambda: "in the pipelines" in first.log_path.read_text(errors="replace"))
        time.sleep(1.0)  # time enough for an ack (written in batches) to reach Redis
        stop_worker(first, signal.SIGKILL)
        first.wait()
    finally:
        stop_worker(first, signal.SIGKILL)
    feed = tmp_path / "second.jsonl"
    second = start_worker(
        REPO_ROOT, redis_server.url, "held", web.seeds, settings, tmp_path / "2.log",
        extra_args=["-O", str(feed)],
    )  # fmt: skip
    wait_all([second], timeout=60)
    later = read_items(feed)
    assert {i["url"] for i in later} == web.expected_urls  # the held page too
    bodies = sent_bodies(web)
    for item in later:
        assert payload_of(data / "bodies", item) == bodies[item["url"]]


# --- 3. a torn .open file -------------------------------------------------------------


# Cut in the 3rd response record's gzip header, in its deflate data, before its
# last trailer byte (its CRC and length no longer check out).
@pytest.mark.parametrize("cut", [3, "half", -1])
def test_open_file_torn_mid_record_keeps_complete_records(tmp_path: Path, cut: int | str) -> None:
    writing, torn = tmp_path / "writing", tmp_path / "torn"
    torn.mkdir()
    bodies = [b"<html><body>%d " % n + b"x" * 3000 * n + b"</body></html>" for n in (1, 2, 3)]
    writer = RollingWarcWriter(writing, prefix="torn")
    locations: list[WarcLocation] = []
    for n, body in enumerate(bodies):
        locations.append(
            writer.write_exchange(
                url=f"http://example.com/{n}",
                method="GET",
                request_headers=[],
                request_body=b"",
                status=200,
                reason="OK",
                response_headers=[("Content-Type", "text/html")],
                body=body,
                fetched_at=datetime.now(UTC),
            )
        )
    assert writer.open_path is not None
    # A copy of the open file (the writer's flock stays on the original), cut
    # inside the 3rd response record, as a kill mid-write leaves it.
    third = locations[2]
    end = third.offset + (third.length // 2 if cut == "half" else int(cut) % third.length)
    torn_path = torn / writer.open_path.name
    torn_path.write_bytes(writer.open_path.read_bytes()[:end])
    writer.close()

    (recovered,) = recover_open_files(torn)
    assert recovered.name == locations[0].filename and not torn_path.exists()
    assert recovered.stat().st_size == locations[2].offset  # the torn tail is cut
    for location, body in zip(locations[:2], bodies[:2], strict=True):
        assert read_payload(recovered, location.offset, location.length).body == body
    index = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "index", "-f", "warc-type,warc-target-uri",
         str(recovered)], check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    records = [json.loads(line) for line in index.splitlines()]
    assert [(r["warc-type"], r.get("warc-target-uri")) for r in records] == [
        ("warcinfo", None),
        ("response", "http://example.com/0"), ("request", "http://example.com/0"),
        ("response", "http://example.com/1"), ("request", "http://example.com/1"),
    ]  # fmt: skip
