"""Body stores (crawlproject/store/: local.py, s3.py, errors.py, uri.py,
factory.py) against a local directory and a real moto_server over HTTP (boto3
with endpoint_url; no mocks)."""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings

from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.store.base import BodyStore
from crawlproject.store.config import StoreConfig
from crawlproject.store.errors import StoreError, StoreUnavailable
from crawlproject.store.factory import open_store
from crawlproject.store.local import LocalStore
from crawlproject.store.s3 import S3Store
from crawlproject.store.uri import parse_store_uri
from testkit.s3_server import (
    TEST_ACCESS_KEY_ID,
    TEST_REGION,
    TEST_SECRET_ACCESS_KEY,
    MotoServer,
)

MIB = 1024 * 1024
SECRET = "s3cr3t-never-logged"
_bucket_numbers = itertools.count()

# Binary data with every byte value, NULs and invalid UTF-8.
BINARY = bytes(range(256)) * 64 + b"\x00\xff\xfe\r\n" + os.urandom(3000)


@pytest.fixture(autouse=True)
def isolated_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials, config files or instance metadata of the machine."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    """One moto_server for the module; each test takes its own bucket."""
    with MotoServer() as server:
        yield server


def s3_settings(server: MotoServer, uri: str, **extra: Any) -> Settings:
    return Settings(
        {
            "CRAWL_STORE_URI": uri,
            "AWS_ENDPOINT_URL": server.endpoint_url,
            "AWS_REGION_NAME": TEST_REGION,
            "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": TEST_SECRET_ACCESS_KEY,
            **extra,
        }
    )


@pytest.fixture
def new_bucket(moto: MotoServer) -> Callable[[], str]:
    def make() -> str:
        name = f"bodies-{os.getpid()}-{next(_bucket_numbers)}"
        moto.client().create_bucket(Bucket=name)
        return name

    return make


@pytest.fixture(params=["local", "s3"])
def store(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    moto: MotoServer,
    new_bucket: Callable[[], str],
) -> BodyStore:
    if request.param == "local":
        return open_store(StoreConfig.from_settings(Settings({"CRAWL_DATA_DIR": str(tmp_path)})))
    uri = f"s3://{new_bucket()}/crawl/web"
    return open_store(StoreConfig.from_settings(s3_settings(moto, uri)))


# --- both backends -------------------------------------------------------------------


def test_round_trip(store: BodyStore) -> None:
    assert not store.exists("a/b.warc.gz")
    store.put_bytes("a/b.warc.gz", BINARY)
    assert store.exists("a/b.warc.gz")
    assert store.get("a/b.warc.gz") == BINARY
    assert store.get_range("a/b.warc.gz", 0, 10) == BINARY[:10]
    assert store.get_range("a/b.warc.gz", 250, 20) == BINARY[250:270]
    assert store.get_range("a/b.warc.gz", len(BINARY) - 5, 100) == BINARY[-5:]  # short at the end
    assert store.get_range("a/b.warc.gz", len(BINARY) + 10, 5) == b""  # past the end
    assert store.get_range("a/b.warc.gz", 3, 0) == b""
    with pytest.raises(ValueError):
        store.get_range("a/b.warc.gz", -1, 5)

    store.put_bytes("a/b.warc.gz", b"replaced")  # a put replaces
    assert store.get("a/b.warc.gz") == b"replaced"
    store.put_bytes("a/c.warc.gz", b"")
    assert store.get("a/c.warc.gz") == b""
    store.put_bytes("z.warc.gz", b"z")
    store.put_bytes("a2/d.warc.gz", b"d")

    assert list(store.keys()) == ["a/b.warc.gz", "a/c.warc.gz", "a2/d.warc.gz", "z.warc.gz"]
    assert list(store.keys("a/")) == ["a/b.warc.gz", "a/c.warc.gz"]
    assert list(store.keys("a")) == ["a/b.warc.gz", "a/c.warc.gz", "a2/d.warc.gz"]
    assert list(store.keys("nothing")) == []


def test_missing_key(store: BodyStore) -> None:
    assert not store.exists("no/such.warc.gz")
    with pytest.raises(KeyError):
        store.get("no/such.warc.gz")
    with pytest.raises(KeyError):
        store.get_range("no/such.warc.gz", 0, 10)


def test_put_file_keeps_the_file_and_is_idempotent(store: BodyStore, tmp_path: Path) -> None:
    src = tmp_path / "spool" / "x.warc.gz"
    src.parent.mkdir()
    src.write_bytes(BINARY)
    store.put_file(src, "crawl/x.warc.gz")
    store.put_file(src, "crawl/x.warc.gz")  # a retry after an unknown outcome
    assert src.read_bytes() == BINARY
    assert store.get("crawl/x.warc.gz") == BINARY
    assert list(store.keys()) == ["crawl/x.warc.gz"]
    with pytest.raises(FileNotFoundError):
        store.put_file(tmp_path / "missing", "crawl/y.warc.gz")
    assert not store.exists("crawl/y.warc.gz")


@pytest.mark.parametrize(
    "key", ["", "../x", "a/../../x", "a/..", "/abs/x", "a//b", "./a", "a/./b", ".hidden", "a\\b"]
)
def test_bad_keys_are_refused(store: BodyStore, key: str, tmp_path: Path) -> None:
    src = tmp_path / "f"
    src.write_bytes(b"x")
    with pytest.raises(ValueError):
        store.put_bytes(key, b"x")
    with pytest.raises(ValueError):
        store.put_file(src, key)
    with pytest.raises(ValueError):
        store.get(key)
    with pytest.raises(ValueError):
        store.exists(key)
    assert list(store.keys()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]  # nothing written beside root


# --- LocalStore ----------------------------------------------------------------------


def test_local_store_never_shows_a_partial_object(tmp_path: Path) -> None:
    """The source is a FIFO: the copy stalls halfway, deterministically."""
    store = LocalStore(tmp_path / "root")
    store.put_bytes("w/file.warc.gz", b"old version")
    half = len(BINARY) // 2
    for key, visible in [("w/file.warc.gz", b"old version"), ("w/new.warc.gz", None)]:
        fifo = tmp_path / f"fifo-{key.replace('/', '-')}"
        os.mkfifo(fifo)
        errors: list[BaseException] = []

        def put(fifo: Path = fifo, key: str = key, errors: list[BaseException] = errors) -> None:
            try:
                store.put_file(fifo, key)
            except BaseException as exc:  # reported below
                errors.append(exc)

        writer = threading.Thread(target=put, daemon=True)  # never blocks pytest's exit
        writer.start()
        with open(fifo, "wb") as pipe:
            pipe.write(BINARY[:half])
            pipe.flush()
            temp_files = f".{key.split('/')[1]}.*.part"
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not list(store.path(key).parent.glob(temp_files)):
                time.sleep(0.01)
            assert list(store.path(key).parent.glob(temp_files))  # the copy is under way
            if visible is None:
                assert not store.exists(key)
                with pytest.raises(KeyError):
                    store.get(key)
            else:
                assert store.get(key) == visible  # the old object until the new one is whole
            assert list(store.keys()) == ["w/file.warc.gz"]
            pipe.write(BINARY[half:])
        writer.join(10)
        assert not errors
        assert store.get(key) == BINARY
    assert sorted(p.name for p in (tmp_path / "root" / "w").iterdir()) == [
        "file.warc.gz",
        "new.warc.gz",
    ]


def test_local_store_failed_put_leaves_no_trace(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "root")
    with pytest.raises(FileNotFoundError):
        store.put_file(tmp_path / "missing", "a/b")
    store.put_bytes("a/b", b"x")
    with pytest.raises(IsADirectoryError):
        store.put_bytes("a", b"y")  # fails at the rename, after the copy
    assert list(store.keys()) == ["a/b"]
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["a"]


# --- S3Store -------------------------------------------------------------------------


def test_s3_keys_live_under_the_prefix(moto: MotoServer, new_bucket: Callable[[], str]) -> None:
    bucket = new_bucket()
    moto.client().put_object(Bucket=bucket, Key="other/outside", Body=b"x")
    store = open_store(StoreConfig.from_settings(s3_settings(moto, f"s3://{bucket}/crawl/web/")))
    assert isinstance(store, S3Store)
    assert store.uri == f"s3://{bucket}/crawl/web/"
    store.put_bytes("k1", b"1")
    listed = moto.client().list_objects_v2(Bucket=bucket)["Contents"]
    assert sorted(item["Key"] for item in listed) == ["crawl/web/k1", "other/outside"]
    assert list(store.keys()) == ["k1"]


def test_s3_listing_pages(moto: MotoServer, new_bucket: Callable[[], str]) -> None:
    store = open_store(StoreConfig.from_settings(s3_settings(moto, f"s3://{new_bucket()}/p")))
    assert isinstance(store, S3Store)
    store.list_page_keys = 2
    names = [f"k{i}" for i in range(5)]
    for name in names:
        store.put_bytes(name, name.encode())
    assert list(store.keys()) == names
    assert list(store.keys("k3")) == ["k3"]


def test_s3_put_file_is_multipart_above_the_threshold(
    moto: MotoServer, new_bucket: Callable[[], str], tmp_path: Path
) -> None:
    bucket = new_bucket()
    settings = s3_settings(
        moto,
        f"s3://{bucket}/warc",
        CRAWL_STORE_MULTIPART_THRESHOLD_BYTES=5 * MIB,
        CRAWL_STORE_MULTIPART_CHUNK_BYTES=5 * MIB,
    )
    store = open_store(StoreConfig.from_settings(settings))
    big = tmp_path / "big.warc.gz"
    data = os.urandom(20_000_000)
    big.write_bytes(data)
    parts_before = moto.request_count("PUT", "partNumber=")
    store.put_file(big, "big.warc.gz")
    head = moto.client().head_object(Bucket=bucket, Key="warc/big.warc.gz")
    assert head["ETag"].strip('"').endswith("-4")  # 20 MB / 5 MiB parts: 4 parts
    assert head["ContentLength"] == len(data)
    assert moto.request_count("PUT", "partNumber=") - parts_before == 4
    assert hashlib.sha256(store.get("big.warc.gz")).digest() == hashlib.sha256(data).digest()
    assert store.get_range("big.warc.gz", 5 * MIB - 3, 6) == data[5 * MIB - 3 : 5 * MIB + 3]

    small = tmp_path / "small.warc.gz"
    small.write_bytes(data[: 5 * MIB - 1])  # below the threshold: one PUT
    store.put_file(small, "small.warc.gz")
    head = moto.client().head_object(Bucket=bucket, Key="warc/small.warc.gz")
    assert "-" not in head["ETag"]


def test_s3_refusal_is_not_retried(moto: MotoServer) -> None:
    settings = s3_settings(
        moto,
        "s3://no-such-bucket-here/x",
        CRAWL_STORE_RETRY_ATTEMPTS=5,
        CRAWL_STORE_RETRY_BASE_SECONDS=10.0,
    )
    store = open_store(StoreConfig.from_settings(settings))
    started = time.monotonic()
    with pytest.raises(StoreError, match="NoSuchBucket") as refused:
        store.put_bytes("k", b"x")
    assert "s3://no-such-bucket-here/x/k" in str(refused.value)
    with pytest.raises(StoreError, match="NoSuchBucket"):
        list(store.keys())
    assert time.monotonic() - started < 5  # no 10 s backoff


def test_s3_outage_then_recovery(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """moto loses its state on restart: the bucket is created again, and what
    failed during the outage is put once the server is back."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's own retries: boto3's usual env
    caplog.set_level(logging.DEBUG, logger="crawlproject")
    spooled = tmp_path / "spool.warc.gz"
    spooled.write_bytes(BINARY)
    with MotoServer() as server:
        server.client().create_bucket(Bucket="outage")
        settings = s3_settings(
            server,
            "s3://outage/bodies",
            CRAWL_STORE_RETRY_ATTEMPTS=2,
            CRAWL_STORE_RETRY_BASE_SECONDS=0.05,
            AWS_SECRET_ACCESS_KEY=SECRET,
        )
        store = open_store(StoreConfig.from_settings(settings))
        store.put_bytes("before", b"1")

        server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="failed 3 times"):
            store.put_file(spooled, "during.warc.gz")
        assert time.monotonic() - started < 5
        with pytest.raises(StoreUnavailable):
            store.exists("before")
        with pytest.raises(StoreUnavailable):
            list(store.keys())
        assert spooled.read_bytes() == BINARY  # the caller's spooled file is untouched
        assert "retry 2 of 2" in caplog.text

        server.start()  # same port, empty
        server.client().create_bucket(Bucket="outage")
        store.put_file(spooled, "during.warc.gz")
        assert store.get("during.warc.gz") == BINARY
        assert list(store.keys()) == ["during.warc.gz"]
    assert SECRET not in caplog.text


def test_s3_credentials_from_boto3_env(
    moto: MotoServer, new_bucket: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = new_bucket()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-env-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    settings = Settings(
        {"CRAWL_STORE_URI": f"s3://{bucket}", "AWS_ENDPOINT_URL": moto.endpoint_url}
    )
    store = open_store(StoreConfig.from_settings(settings))
    assert isinstance(store, S3Store)
    assert store.client.meta.region_name == "eu-west-1"
    assert store.client._request_signer._credentials.access_key == "from-env"
    store.put_bytes("k", b"v")
    assert store.get("k") == b"v"


# --- configuration -------------------------------------------------------------------


def test_config_default_is_a_local_dir_under_the_data_dir(tmp_path: Path) -> None:
    config = StoreConfig.from_settings(Settings({"CRAWL_DATA_DIR": str(tmp_path / "data")}))
    assert config.local_root == tmp_path / "data" / "bodies"
    assert config.uri == (tmp_path / "data" / "bodies").as_uri()
    assert config.multipart_threshold_bytes == 8 * MIB
    assert config.multipart_chunk_bytes == 64 * MIB
    store = open_store(config)
    assert isinstance(store, LocalStore)
    assert not (tmp_path / "data").exists()  # nothing created before the first put


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:///srv/bodies", (Path("/srv/bodies"), "", "")),
        ("file://localhost/srv/my%20bodies/", (Path("/srv/my bodies"), "", "")),
        ("/srv/bodies", (Path("/srv/bodies"), "", "")),
        ("s3://bucket", (None, "bucket", "")),
        ("s3://bucket/", (None, "bucket", "")),
        ("s3://my.bucket-1/crawl/web", (None, "my.bucket-1", "crawl/web/")),
        ("S3://bucket/crawl/", (None, "bucket", "crawl/")),
    ],
)
def test_config_uris(uri: str, expected: tuple[Path | None, str, str]) -> None:
    assert parse_store_uri(uri) == expected


def test_config_relative_plain_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_store_uri("rel/bodies") == (tmp_path / "rel" / "bodies", "", "")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("http://example.com/x", "unknown scheme"),
        ("gs://bucket/x", "unknown scheme"),
        ("s3://", "no bucket"),
        ("s3:///prefix", "no bucket"),
        ("s3://ab/x", "bad bucket name"),
        ("s3://Bucket/x", "bad bucket name"),
        ("s3://bucket_x/x", "bad bucket name"),
        ("s3://bucket/a/../b", "bad prefix"),
        ("s3://bucket/x?y=1", "no query"),
        ("s3://AKIA:secret@bucket/x", "credentials"),
        ("file://relative/dir", "absolute path"),
    ],
)
def test_config_bad_uris(uri: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        StoreConfig.from_settings(Settings({"CRAWL_STORE_URI": uri}))
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"CRAWL_STORE_MULTIPART_CHUNK_BYTES": 1 * MIB}, "CHUNK_BYTES"),
        ({"CRAWL_STORE_MULTIPART_THRESHOLD_BYTES": 0}, "THRESHOLD_BYTES"),
        ({"CRAWL_STORE_RETRY_ATTEMPTS": -1}, "RETRY_ATTEMPTS"),
        ({"CRAWL_STORE_RETRY_BASE_SECONDS": -1}, "RETRY_BASE_SECONDS"),
        ({"AWS_ACCESS_KEY_ID": "id-only"}, "both"),
        ({"AWS_SESSION_TOKEN": "token"}, "AWS_SESSION_TOKEN"),
        ({"AWS_USE_SSL": "maybe"}, "AWS_USE_SSL"),
    ],
)
def test_config_bad_values(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        StoreConfig.from_settings(Settings({"CRAWL_STORE_URI": "s3://bucket/x", **settings}))


def test_config_aws_settings_reach_the_client() -> None:
    settings = Settings(
        {
            "CRAWL_STORE_URI": "s3://bucket/x",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
            "AWS_REGION_NAME": "eu-west-3",
            "AWS_ACCESS_KEY_ID": "id-from-settings",
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_SESSION_TOKEN": "token-from-settings",
            "AWS_USE_SSL": "false",
            "AWS_VERIFY": "False",
            "AWS_MAX_POOL_CONNECTIONS": 4,
            "CRAWL_STORE_MULTIPART_THRESHOLD_BYTES": 16 * MIB,
            "CRAWL_STORE_MULTIPART_CHUNK_BYTES": 32 * MIB,
        }
    )
    config = StoreConfig.from_settings(settings)
    assert config.use_ssl is False
    assert config.verify is False
    assert SECRET not in repr(config)
    assert "id-from-settings" not in repr(config)
    store = open_store(config)  # no request is made: the endpoint is a dead port
    assert isinstance(store, S3Store)
    meta = store.client.meta
    assert meta.endpoint_url == "http://127.0.0.1:9"
    assert meta.region_name == "eu-west-3"
    assert meta.config.max_pool_connections == 4
    assert meta.config.retries["mode"] == "standard"
    credentials = store.client._request_signer._credentials
    assert (credentials.access_key, credentials.secret_key, credentials.token) == (
        "id-from-settings",
        SECRET,
        "token-from-settings",
    )
    assert store.transfer.multipart_threshold == 16 * MIB
    assert store.transfer.multipart_chunksize == 32 * MIB
    assert store.transfer.max_request_concurrency == 4
    assert SECRET not in repr(store)


def test_config_verify_values() -> None:
    def verify(value: object) -> object:
        settings = Settings({"CRAWL_STORE_URI": "s3://bucket/x", "AWS_VERIFY": value})
        return StoreConfig.from_settings(settings).verify

    assert verify(None) is None
    assert verify(True) is True
    assert verify("true") is True
    assert verify("0") is False
    assert verify("/etc/ssl/ca.pem") == "/etc/ssl/ca.pem"
