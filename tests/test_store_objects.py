"""Page bodies as content-addressed objects (CRAWL_STORE_FORMAT = "object",
crawlproject/store/objects.py): the writer alone, then real crawls to local
disk and to S3 (a real moto_server over HTTP)."""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from crawlproject.body_digest import payload_digest
from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.store.config import BodyStoreConfig
from crawlproject.store.index import find
from crawlproject.store.local import LocalStore
from crawlproject.store.objects import (
    ObjectWriter,
    object_name,
    store_key,
    sweep_object_spool,
)
from crawlproject.store.uploader import SpoolUploader
from crawlproject.store.warc_recovery import recover_open_files
from testkit.crawlproc import REPO_ROOT
from testkit.redis_server import RedisServer
from testkit.s3_server import TEST_BUCKET, TEST_REGION, MotoServer
from testkit.testweb import TestWeb
from tests.test_store_crawl import crawl, sent_bodies

FETCHED_AT = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
BUCKET = TEST_BUCKET
KEY_PREFIX = "crawl/"
UPLOAD_TIMEOUT_SECONDS = 10.0


def new_writer(spool: Path, **kwargs: Any) -> tuple[ObjectWriter, list[Path]]:
    """A writer whose handed-over files are recorded (no uploader)."""
    handed: list[Path] = []
    spool.mkdir(parents=True, exist_ok=True)
    writer = ObjectWriter(spool, "crawl-w1", KEY_PREFIX, on_finished=handed.append, **kwargs)
    return writer, handed


def write(writer: ObjectWriter, url: str, body: bytes) -> str:
    return writer.write_page(url, 200, "text/html", body, FETCHED_AT).key


def index_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_object_is_the_gzip_of_the_body_named_by_its_digest(tmp_path: Path) -> None:
    writer, handed = new_writer(tmp_path / "spool")
    body = b"<html>" + os.urandom(5000) + b"</html>"
    stored = writer.write_page("http://site.test/a", 200, "text/html", body, FETCHED_AT)
    digest = payload_digest(body)
    name = digest.removeprefix("sha1:") + ".gz"
    assert stored.digest == digest and stored.written
    assert stored.key == f"crawl/objects/{name}" == store_key(KEY_PREFIX, Path(name))
    assert gzip.decompress((tmp_path / "spool" / name).read_bytes()) == body
    index = writer.close()
    assert index is not None and index.name.endswith(".cdxj") and index.name.startswith("crawl-w1-")
    assert handed == [tmp_path / "spool" / name, index]  # the object before its index
    assert store_key(KEY_PREFIX, index) == f"crawl/index/{index.name}"
    [line] = index_lines(index)
    key, timestamp, raw = line.split(" ", 2)
    assert (key, timestamp) == ("test,site)/a", "20240506070809")  # SURT, as the WARC indexes
    assert json.loads(raw) == {
        "url": "http://site.test/a", "mime": "text/html", "status": 200, "digest": digest,
        "length": len(body), "object": stored.key,
    }  # fmt: skip
    entry = find(index_lines(index), "http://site.test/a")
    assert entry is not None and entry.object_key == stored.key and entry.length == len(body)


def test_same_body_twice_is_one_file_and_one_upload(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    store = LocalStore(tmp_path / "store")
    uploader = SpoolUploader(
        store, spool, KEY_PREFIX, key_for=lambda p: store_key(KEY_PREFIX, p),
        sweep=sweep_object_spool,
    )  # fmt: skip
    uploader.start()
    writer = ObjectWriter(spool, "crawl-w1", KEY_PREFIX, on_finished=uploader.submit)
    body = b"<html>same body</html>"
    first = writer.write_page("http://a.test/", 200, "text/html", body, FETCHED_AT)
    second = writer.write_page("http://b.test/", 200, "text/html", body, FETCHED_AT)
    assert first.key == second.key and first.written and not second.written
    # One file spooled, unless the uploader's thread has taken it already;
    # the store below holds that one object either way.
    spooled = [p.name for p in spool.iterdir() if p.name.endswith(".gz")]
    assert spooled in ([], [object_name(first.digest)])
    writer.close()
    assert uploader.close(UPLOAD_TIMEOUT_SECONDS) == 0
    assert uploader.uploaded_files == 2  # one object, one index file
    keys = list(store.keys())
    assert len(keys) == 2 and first.key in keys
    assert gzip.decompress(store.get(first.key)) == body
    [index_key] = [k for k in keys if k.startswith("crawl/index/")]
    lines = store.get(index_key).decode().splitlines()
    for url in ("http://a.test/", "http://b.test/"):
        entry = find(lines, url)
        assert entry is not None and entry.object_key == first.key
    assert not list(spool.iterdir())  # all uploaded


def test_digest_already_in_the_spool_is_not_written_again(tmp_path: Path) -> None:
    # An LRU of one forgets the first body; its spool file still says "stored".
    writer, handed = new_writer(tmp_path / "spool", max_stored_digests=1)
    a, b = b"body a", b"body b"
    assert writer.write_page("http://x.test/1", 200, "text/html", a, FETCHED_AT).written
    assert writer.write_page("http://x.test/2", 200, "text/html", b, FETCHED_AT).written
    path = tmp_path / "spool" / object_name(payload_digest(a))
    before = path.stat().st_mtime_ns
    again = writer.write_page("http://x.test/3", 200, "text/html", a, FETCHED_AT)
    assert not again.written and path.stat().st_mtime_ns == before
    # Handed over again, so this uploader queues it before the index naming it.
    assert handed.count(path) == 2
    writer.close()


def test_write_is_atomic_and_stale_tmp_files_are_removed(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    writer, _ = new_writer(spool)
    write(writer, "http://x.test/", b"<html>x</html>" * 100)
    # Nothing but the object and the open index: no temporary file is left.
    names = sorted(p.name for p in spool.iterdir())
    assert len(names) == 2 and names[0].endswith(".gz") and names[1].endswith(".cdxj.open")
    writer.close()
    # A killed writer's temporary file is deleted; a live writer's (locked) is kept.
    dead = spool / ".ABC.gz.0011aabb.tmp"
    dead.write_bytes(b"half an object")
    live = spool / ".DEF.gz.2233ccdd.tmp"
    live.write_bytes(b"being written")
    with open(live, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        swept = sweep_object_spool(spool)
        assert not dead.exists() and live.exists()
    assert all(not p.name.startswith(".") for p in swept)
    assert [p.suffix for p in swept] == [".gz", ".cdxj"]  # objects before index files


def test_truncated_cdxj_open_is_recovered(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    writer, _ = new_writer(spool)
    bodies = [f"<html>page {n}</html>".encode() for n in range(3)]
    keys = [write(writer, f"http://x.test/{n}", body) for n, body in enumerate(bodies)]
    open_path = writer.open_index_path
    assert open_path is not None
    # What a killed worker leaves: its objects and the .open index, with a torn line.
    killed = tmp_path / "killed"
    shutil.copytree(spool, killed)
    left = killed / open_path.name
    complete = left.read_bytes()
    with open(left, "ab") as f:
        f.write(b'http://x.test/3 20240506070809 {"url": "http://x.te')
    writer.close()
    # The WARC spool's recovery does not take .cdxj.open files for WARC files.
    assert recover_open_files(killed) == [] and left.exists()
    swept = sweep_object_spool(killed)
    recovered = killed / open_path.name.removesuffix(".open")
    assert not left.exists() and recovered.read_bytes() == complete
    assert swept[-1] == recovered and len(swept) == 4  # 3 objects, then the index
    lines = index_lines(recovered)
    assert len(lines) == 3
    for n, key in enumerate(keys):
        entry = find(lines, f"http://x.test/{n}")
        assert entry is not None and entry.object_key == key


def test_index_with_no_complete_line_is_deleted(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    torn = spool / "crawl-w1-20240506070809-00000.cdxj.open"
    torn.write_bytes(b"http://x.test/ 2024")
    assert sweep_object_spool(spool) == [] and not list(spool.iterdir())


def test_index_rotates_by_size_after_its_objects(tmp_path: Path) -> None:
    writer, handed = new_writer(tmp_path / "spool", max_index_bytes=300)
    for n in range(5):
        write(writer, f"http://x.test/{n}", f"<html>{n}</html>".encode())
    writer.close()
    indexes = [p for p in handed if p.name.endswith(".cdxj")]
    assert len(indexes) >= 2
    named: set[str] = set()
    for position, path in enumerate(handed):
        if path.name.endswith(".gz"):
            named.add(path.name)
            continue
        # Every object an index names was handed over before it.
        for line in index_lines(path):
            obj = json.loads(line.split(" ", 2)[2])["object"]
            assert obj.rsplit("/", 1)[1] in {p.name for p in handed[:position]}
    assert len(named) == 5


def test_unknown_store_format_is_refused() -> None:
    ok = BodyStoreConfig.from_settings(Settings({"CRAWL_STORE_FORMAT": "object"}))
    assert ok.store_format == "object"
    assert BodyStoreConfig.from_settings(Settings()).store_format == "warc"
    with pytest.raises(ConfigError, match="CRAWL_STORE_FORMAT"):
        BodyStoreConfig.from_settings(Settings({"CRAWL_STORE_FORMAT": "zip"}))


# --- real crawls -----------------------------------------------------------------


def duplicate_pages(body: bytes) -> dict[int, dict[str, dict[str, str]]]:
    """Two paths of host 1 serving the same body (TestWeb ``special`` routes)."""
    page = {"body": body.decode(), "content_type": "text/html"}
    return {1: {"/copy-a.html": page, "/copy-b.html": page}}


def test_pages_are_stored_as_objects_on_local_disk(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # A page above the inline-write size goes through the writer thread.
    copy = ("<html><body>" + "the same page " * 10_000 + "</body></html>").encode()
    web = testweb_factory(
        hosts=3, pages=6, latency_ms=0, links=2, cross_links=1, query_variants=0,
        special=duplicate_pages(copy),
    )  # fmt: skip
    data = tmp_path / "data"
    copies = (web.base_url(1) + "copy-a.html", web.base_url(1) + "copy-b.html")
    stats, items = crawl(
        redis_server, "objects", web, tmp_path, copies, CRAWL_DATA_DIR=str(data),
        CRAWL_DEDUPE_ENABLED=False, CRAWL_STORE_FORMAT="object",
    )  # fmt: skip
    bodies = sent_bodies(web)
    assert {i["url"] for i in items} - set(copies) == set(bodies) == web.expected_urls
    bodies.update(dict.fromkeys(copies, copy))
    store_root = data / "bodies"
    for item in items:
        assert "crawl_response" not in item and "warc_file" not in item
        assert item["payload_digest"] and item["fetched_at"] and item["final_url"]
        key = str(item["body_key"])
        assert key.startswith("objects/objects/")
        body = gzip.decompress((store_root / key).read_bytes())
        assert body == bodies[str(item["url"])]  # byte-identical to what was sent
        assert payload_digest(body) == item["payload_digest"]
    # The page served under two URLs is one object.
    copy_keys = {i["body_key"] for i in items if i["url"] in copies}
    assert len(copy_keys) == 1
    objects = sorted((store_root / "objects" / "objects").glob("*.gz"))
    assert len(objects) == len(set(bodies.values())) == len(items) - 1
    assert stats["store/objects_written"] == len(objects)
    assert stats["store/objects_already_stored"] == 1
    assert stats["store/pages"] == len(items)
    indexes = sorted((store_root / "objects" / "index").glob("*.cdxj"))
    assert indexes and stats["store/files_uploaded"] == len(objects) + len(indexes)
    assert stats["store/files_spooled_at_close"] == 0
    assert not [p for p in (data / "spool").rglob("*") if p.is_file()]  # all moved to the store

    # crawlproject body URL finds pages through the index files.
    cli = [
        sys.executable, "-m", "crawlproject", "-s", f"CRAWL_DATA_DIR={data}", "--crawl", "objects",
    ]  # fmt: skip
    for url in (sorted(bodies)[0], copies[1]):
        shown = subprocess.run([*cli, "body", url], cwd=REPO_ROOT, capture_output=True, check=True)
        assert shown.stdout == bodies[url]
    head = subprocess.run(
        [*cli, "body", "--headers", copies[0]], cwd=REPO_ROOT, capture_output=True, text=True,
        check=True,
    ).stdout.splitlines()  # fmt: skip
    assert head == ["200 OK", "Content-Type: text/html"]
    missing = subprocess.run([*cli, "body", copies[0] + "nope"], cwd=REPO_ROOT, capture_output=True)
    assert missing.returncode == 1 and b"not stored" in missing.stderr


def test_objects_are_stored_in_s3_one_put_per_distinct_body(
    redis_server: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
    moto: MotoServer,
) -> None:
    copy = b"<html><body>served twice</body></html>"
    web = testweb_factory(
        hosts=2, pages=5, latency_ms=0, links=2, cross_links=0, query_variants=0,
        special=duplicate_pages(copy),
    )  # fmt: skip
    copies = (web.base_url(1) + "copy-a.html", web.base_url(1) + "copy-b.html")
    stats, items = crawl(
        redis_server, "s3objects", web, tmp_path, copies, CRAWL_DEDUPE_ENABLED=False,
        CRAWL_STORE_FORMAT="object", CRAWL_DATA_DIR=str(tmp_path / "data"),
        CRAWL_STORE_URI=f"s3://{BUCKET}/bodies", AWS_ENDPOINT_URL=moto.endpoint_url,
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION_NAME=TEST_REGION,
    )  # fmt: skip
    bodies = sent_bodies(web)
    assert {i["url"] for i in items} - set(copies) == set(bodies)
    bodies.update(dict.fromkeys(copies, copy))
    client = moto.client()
    for item in items:
        answer = client.get_object(Bucket=BUCKET, Key=f"bodies/{item['body_key']}")
        assert gzip.decompress(answer["Body"].read()) == bodies[str(item["url"])]
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="bodies/s3objects/")
    keys = [entry["Key"] for entry in listed.get("Contents", [])]
    objects = [k for k in keys if k.startswith("bodies/s3objects/objects/")]
    indexes = [k for k in keys if k.startswith("bodies/s3objects/index/")]
    distinct = len(set(bodies.values()))
    assert len(objects) == distinct == len(items) - 1 and indexes
    assert len(keys) == len(objects) + len(indexes)
    # One PUT per distinct body and per index file (the bucket's own PUT excluded).
    assert moto.request_count("PUT", f"/{BUCKET}/bodies/") == distinct + len(indexes)
    assert stats["store/objects_already_stored"] == 1
    assert stats["store/files_spooled_at_close"] == 0
