"""SpoolUploader (crawlproject/store/uploader.py): WARC files written by a real
RollingWarcWriter, moved to a local directory store or to a real moto_server
over HTTP, through outages made by stopping that server (no mocks)."""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from crawlproject.store.base import BodyStore
from crawlproject.store.config import StoreConfig
from crawlproject.store.factory import open_store
from crawlproject.store.local import LocalStore
from crawlproject.store.rolling import OPEN_SUFFIX
from crawlproject.store.uploader import SpoolUploader
from crawlproject.store.warc import RollingWarcWriter, WarcLocation
from crawlproject.store.warc_read import read_payload
from testkit.s3_server import (
    TEST_ACCESS_KEY_ID,
    TEST_REGION,
    TEST_SECRET_ACCESS_KEY,
    MotoServer,
)

FETCHED_AT = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
PAGE_BYTES = 3000  # random, so incompressible: a file of FILE_BYTES holds a few pages
FILE_BYTES = 10_000
KEY_PREFIX = "crawl/w1/"
# Fast backoff of the uploader in the tests (the defaults are 1 s to 60 s).
FAST_RETRY = {"retry_initial_seconds": 0.05, "retry_max_seconds": 0.3}
_bucket_numbers = itertools.count()


@pytest.fixture(autouse=True)
def isolated_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials or config of the machine; one botocore attempt per call,
    so an outage shows within milliseconds."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    """One moto_server for the tests that do not stop it; each takes its own bucket."""
    with MotoServer() as server:
        yield server


def s3_store(
    server: MotoServer, bucket: str, retry_attempts: int = 1, retry_base_seconds: float = 0.05
) -> BodyStore:
    settings = Settings(
        {
            "CRAWL_STORE_URI": f"s3://{bucket}/bodies",
            "AWS_ENDPOINT_URL": server.endpoint_url,
            "AWS_REGION_NAME": TEST_REGION,
            "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": TEST_SECRET_ACCESS_KEY,
            "CRAWL_STORE_RETRY_ATTEMPTS": retry_attempts,
            "CRAWL_STORE_RETRY_BASE_SECONDS": retry_base_seconds,
        }
    )
    return open_store(StoreConfig.from_settings(settings))


def new_bucket(server: MotoServer) -> str:
    name = f"spool-{os.getpid()}-{next(_bucket_numbers)}"
    server.client().create_bucket(Bucket=name)
    return name


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path, moto: MotoServer) -> BodyStore:
    if request.param == "local":
        # The default backend: no CRAWL_STORE_URI, a directory under the data dir.
        config = StoreConfig.from_settings(Settings({"CRAWL_DATA_DIR": str(tmp_path / "data")}))
        store = open_store(config)
        assert isinstance(store, LocalStore)
        return store
    return s3_store(moto, new_bucket(moto))


@dataclass(frozen=True)
class Page:
    url: str
    body: bytes
    location: WarcLocation


def write_pages(writer: RollingWarcWriter, count: int, tag: str = "p") -> list[Page]:
    pages = []
    for i in range(count):
        url = f"http://site.test/{tag}/{i}"
        body = f"<html>{tag} {i}</html>".encode() + os.urandom(PAGE_BYTES)
        location = writer.write_exchange(
            url=url,
            method="GET",
            request_headers=[("User-Agent", "crawlproject-test")],
            request_body=b"",
            status=200,
            reason="OK",
            response_headers=[("Content-Type", "text/html")],
            body=body,
            fetched_at=FETCHED_AT,
        )
        pages.append(Page(url, body, location))
    return pages


class Kept:
    """A writer's ``on_finished`` that copies each finished file aside (the
    uploader deletes the spooled one) and then hands it on."""

    def __init__(self, directory: Path, then: Callable[[Path], None]) -> None:
        self.directory = directory
        self.then = then
        self.names: list[str] = []
        directory.mkdir(parents=True, exist_ok=True)

    def __call__(self, path: Path) -> None:
        shutil.copyfile(path, self.directory / path.name)
        self.names.append(path.name)
        self.then(path)

    def data(self, name: str) -> bytes:
        return (self.directory / name).read_bytes()


def wait_until(condition: Callable[[], bool], timeout_seconds: float) -> bool:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def logged(caplog: pytest.LogCaptureFixture, text: str, since: int = 0) -> int:
    """How many records from ``since`` on (any thread's) say ``text``."""
    return sum(text in r.getMessage() for r in caplog.records[since:])


def spooled(spool: Path) -> list[str]:
    return sorted(path.name for path in spool.iterdir()) if spool.exists() else []


def check_pages(store: BodyStore, pages: list[Page], scratch: Path) -> None:
    """Each page reads back from its file as fetched from the store."""
    scratch.mkdir(parents=True, exist_ok=True)
    for name in {page.location.filename for page in pages}:
        (scratch / name).write_bytes(store.get(KEY_PREFIX + name))
    for page in pages:
        location = page.location
        stored = read_payload(scratch / location.filename, location.offset, location.length)
        assert (stored.url, stored.body) == (page.url, page.body)


# --- tests ---------------------------------------------------------------------------


def test_finished_files_end_in_the_store_and_leave_the_spool(
    store: BodyStore, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    uploaded: list[tuple[Path, str, int]] = []
    uploader = SpoolUploader(
        store, spool, KEY_PREFIX, on_uploaded=lambda *args: uploaded.append(args), **FAST_RETRY
    )
    uploader.start()  # the spool does not exist yet: nothing to recover
    kept = Kept(tmp_path / "kept", uploader.submit)
    writer = RollingWarcWriter(spool, "w1", max_file_bytes=FILE_BYTES, on_finished=kept)
    pages = write_pages(writer, 10)
    writer.close()

    assert uploader.close(10.0) == 0
    assert len(kept.names) >= 3  # rotated by size
    assert list(store.keys()) == sorted(KEY_PREFIX + name for name in kept.names)
    for name in kept.names:
        assert store.get(KEY_PREFIX + name) == kept.data(name)
    assert spooled(spool) == []
    sizes = [len(kept.data(name)) for name in kept.names]
    assert uploader.uploaded_files == len(kept.names)
    assert uploader.uploaded_bytes == sum(sizes)
    assert uploaded == [
        (spool / name, KEY_PREFIX + name, size)
        for name, size in zip(kept.names, sizes, strict=True)
    ]
    assert uploader.pending() == 0
    assert uploader.last_error is None
    assert not uploader.running
    check_pages(store, pages, tmp_path / "fetched")


def test_start_uploads_what_a_killed_worker_left(store: BodyStore, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    # A finished file that a stopped worker could not upload.
    old = RollingWarcWriter(spool, "old")
    old_pages = write_pages(old, 2, "old")
    old_file = old.close()
    assert old_file is not None
    # A killed worker's open file, with the torn tail of a write cut short.
    live = RollingWarcWriter(spool, "live")
    live_pages = write_pages(live, 3, "live")
    assert live.open_path is not None
    good = live.open_path.read_bytes()
    dead_name = "dead-20240101000000-00000.warc.gz"
    (spool / (dead_name + OPEN_SUFFIX)).write_bytes(good + b"\x1f\x8b\x08\x00torn")
    dead_pages = [
        Page(p.url, p.body, WarcLocation(dead_name, p.location.offset, p.location.length))
        for p in live_pages
    ]

    uploader = SpoolUploader(store, spool, KEY_PREFIX, **FAST_RETRY)
    uploader.start()
    assert wait_until(lambda: uploader.uploaded_files == 2, 10.0)
    assert store.get(KEY_PREFIX + dead_name) == good  # recovered: the torn tail cut off
    check_pages(store, old_pages + dead_pages, tmp_path / "fetched")
    # The file a live writer still holds is neither recovered nor uploaded.
    assert spooled(spool) == [live.open_path.name]

    live_file = live.close()
    assert live_file is not None
    uploader.submit(live_file)
    assert uploader.close(10.0) == 0
    assert spooled(spool) == []
    assert sorted(store.keys()) == sorted(
        KEY_PREFIX + name for name in (dead_name, old_file.name, live_file.name)
    )
    check_pages(store, live_pages, tmp_path / "fetched-live")


def test_s3_outage_keeps_files_spooled_then_uploads_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="crawlproject.store")
    spool = tmp_path / "spool"
    with MotoServer() as server:
        server.client().create_bucket(Bucket="outage")
        store = s3_store(server, "outage")
        uploader = SpoolUploader(store, spool, KEY_PREFIX, **FAST_RETRY)
        uploader.start()
        kept = Kept(tmp_path / "kept", uploader.submit)
        writer = RollingWarcWriter(spool, "w1", max_file_bytes=FILE_BYTES, on_finished=kept)
        write_pages(writer, 3, "before")
        writer.rotate()
        assert wait_until(lambda: uploader.pending() == 0, 10.0)
        assert uploader.uploaded_files == 1

        server.stop()  # moto forgets the bucket and the object
        stopped = len(caplog.records)
        pages = write_pages(writer, 9, "during")
        writer.close()
        during = kept.names[1:]
        assert len(during) >= 3
        # Several failed attempts, each a line: the files stay through all of them.
        assert wait_until(lambda: logged(caplog, " unavailable (", stopped) >= 3, 15.0)
        assert uploader.pending() == len(during)
        assert spooled(spool) == sorted(during)  # nothing lost, nothing half-done
        assert uploader.last_error is not None and "StoreUnavailable" in uploader.last_error
        assert uploader.uploaded_files == 1

        server.start()  # same port, empty
        server.client().create_bucket(Bucket="outage")
        assert wait_until(lambda: uploader.pending() == 0, 15.0), uploader.last_error
        assert uploader.close(5.0) == 0
        assert list(store.keys()) == sorted(KEY_PREFIX + name for name in during)
        for name in during:
            assert store.get(KEY_PREFIX + name) == kept.data(name)
        assert spooled(spool) == []
        assert uploader.uploaded_files == 1 + len(during)
        assert uploader.last_error is None
        check_pages(store, pages, tmp_path / "fetched")


def test_close_with_s3_down_returns_in_time_and_the_next_start_uploads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="crawlproject.store")
    spool = tmp_path / "spool"
    with MotoServer() as server:
        server.client().create_bucket(Bucket="closing")
        # put_file itself spends 2.1-4.2 s in the store's retries, and the
        # uploader then backs off 2.5-5 s: close() must wait for neither.
        slow = s3_store(server, "closing", retry_attempts=3, retry_base_seconds=0.6)
        uploader = SpoolUploader(
            slow, spool, KEY_PREFIX, retry_initial_seconds=5.0, retry_max_seconds=10.0
        )
        uploader.start()
        server.stop()
        kept = Kept(tmp_path / "kept", uploader.submit)
        writer = RollingWarcWriter(spool, "w1", max_file_bytes=FILE_BYTES, on_finished=kept)
        write_pages(writer, 6)
        writer.close()
        names = kept.names
        assert len(names) >= 2
        # The first put_file is under way: its first attempt failed, and its
        # retries (2.1-4.2 s of back-off) have begun.
        assert wait_until(lambda: logged(caplog, "): retry 1 of 3 in ") >= 1, 10.0)

        started = time.monotonic()
        assert uploader.close(1.0) == len(names)
        assert time.monotonic() - started < 1.5
        assert uploader.running  # still in that put_file
        assert spooled(spool) == sorted(names)
        # A file finished after close() is not taken, and stays for the next start.
        late = RollingWarcWriter(spool, "late")
        write_pages(late, 1, "late")
        late_file = late.close()
        assert late_file is not None
        uploader.submit(late_file)
        assert uploader.pending() == len(names)
        # The put_file in flight ends alone (failing), and the thread with it.
        assert wait_until(lambda: not uploader.running, 6.0)
        assert spooled(spool) == sorted([*names, late_file.name])

        server.start()
        server.client().create_bucket(Bucket="closing")
        store = s3_store(server, "closing")
        order: list[str] = []
        next_uploader = SpoolUploader(
            store, spool, KEY_PREFIX, on_uploaded=lambda p, k, n: order.append(p.name), **FAST_RETRY
        )
        next_uploader.start()
        assert next_uploader.close(10.0) == 0
        assert order == [*sorted(names), late_file.name]  # oldest first, whatever the prefix
        assert spooled(spool) == []
        assert list(store.keys()) == sorted(KEY_PREFIX + n for n in [*names, late_file.name])
        for name in names:
            assert store.get(KEY_PREFIX + name) == kept.data(name)


def test_a_refusal_is_logged_once_and_retried_until_fixed(
    moto: MotoServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="crawlproject.store.uploader")
    bucket = f"missing-{os.getpid()}-{next(_bucket_numbers)}"
    store = s3_store(moto, bucket)
    spool = tmp_path / "spool"
    uploader = SpoolUploader(store, spool, KEY_PREFIX, **FAST_RETRY)
    uploader.start()
    writer = RollingWarcWriter(spool, "w1", on_finished=uploader.submit)
    write_pages(writer, 2)
    finished = writer.close()
    assert finished is not None

    assert wait_until(lambda: logged(caplog, "failed again") >= 3, 10.0)  # a few attempts
    error = uploader.last_error
    assert error is not None and "StoreError" in error and "NoSuchBucket" in error
    refusals = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(refusals) == 1, [r.getMessage() for r in refusals]
    retries = [r for r in caplog.records if "failed again" in r.getMessage()]
    assert retries  # it kept trying
    assert spooled(spool) == [finished.name]

    moto.client().create_bucket(Bucket=bucket)  # the operator fixes the store
    assert wait_until(lambda: uploader.pending() == 0, 5.0)
    assert uploader.close(5.0) == 0
    assert list(store.keys()) == [KEY_PREFIX + finished.name]
    assert spooled(spool) == []


def test_bad_arguments_are_refused_at_construction(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    for prefix in ("/abs/", "a//b/", "../up/"):
        with pytest.raises(ValueError):
            SpoolUploader(store, tmp_path / "spool", prefix)
    bad: dict[str, Any]
    for bad in (
        {"retry_initial_seconds": 0.0},
        {"retry_initial_seconds": 5.0, "retry_max_seconds": 1.0},
    ):
        with pytest.raises(ValueError):
            SpoolUploader(store, tmp_path / "spool", "", **bad)
    uploader = SpoolUploader(store, tmp_path / "spool", "")
    assert not (tmp_path / "spool").exists()  # no I/O before start()
    assert uploader.close(1.0) == 0  # never started: nothing to do
