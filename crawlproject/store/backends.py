"""Where page bodies go: a local directory or an S3 bucket, behind one interface.

``CRAWL_STORE_URI`` picks the store (:class:`StoreConfig`):

* unset: the directory ``<CRAWL_DATA_DIR>/bodies`` (:class:`LocalStore`);
* ``file:///abs/dir`` or a plain path: that directory;
* ``s3://bucket/prefix``: objects ``prefix/<key>`` in ``bucket`` (:class:`S3Store`),
  through boto3. The client takes Scrapy's ``AWS_*`` settings (keys, session
  token, ``AWS_ENDPOINT_URL`` for MinIO and other S3-compatible stores,
  ``AWS_REGION_NAME``, ``AWS_USE_SSL``, ``AWS_VERIFY``) and, for any left
  unset, boto3's usual chain (``AWS_*`` environment variables, ``~/.aws``
  files, instance roles). ``AWS_MAX_ATTEMPTS`` in the environment sets
  botocore's own retries (standard mode, 3 attempts by default).

Keys are relative paths (``crawl/2026/11/file.warc.gz``): segments separated by
``/``, none empty or starting with ``.`` (so no ``..``, and a key names the same
object on both backends). Both stores write whole objects only: a reader sees
the old object or the new one, never a part.

Every method blocks (disk or network I/O): callers in the reactor run them in a
thread (``deferToThread``), never in the reactor's own.

S3 failures are sorted in two: the store cannot be reached (connection refused
or closed, timeouts, 5xx and throttling answers) is retried with exponential
backoff ``CRAWL_STORE_RETRY_ATTEMPTS`` times, then :class:`StoreUnavailable` is
raised and the caller keeps its file spooled on local disk and tries again
later; a refusal (no such bucket, access denied, a bad request) raises
:class:`StoreError` at once, as retrying cannot help.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import unquote, urlsplit

from crawlproject.frontier.config import ConfigError
from crawlproject.setting_values import crawl_setting

if TYPE_CHECKING:
    from boto3.s3.transfer import TransferConfig
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

T = TypeVar("T")

MIB = 1024 * 1024
# S3's limits on a multipart upload's parts (all but the last part).
S3_MIN_PART_BYTES = 5 * MIB
S3_MAX_PART_BYTES = 5 * 1024 * MIB
# A connection that is not accepted within this long counts as an outage
# (botocore's default, 60 s, would hold a thread a minute per attempt).
S3_CONNECT_TIMEOUT_SECONDS = 10.0
# Longest single wait of the outer retry loop.
RETRY_MAX_SLEEP_SECONDS = 60.0
# S3 error codes that mean "later", whatever their HTTP status.
_TRANSIENT_CODES = frozenset(
    {
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "ServiceUnavailable",
        "InternalError",
    }
)
_NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound"})
# A DNS-style bucket name (the rules of S3 general purpose buckets).
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_LOCAL_HOSTS = frozenset({"", "localhost"})


class StoreUnavailable(Exception):
    """The store could not be reached after the bounded retries: the caller
    keeps its file spooled and tries again later."""


class StoreError(Exception):
    """The store refused the operation (no such bucket, access denied, …):
    retrying will not help; the configuration or the store needs fixing."""


class BodyStore(Protocol):
    """Objects (WARC files) by key, in a directory or a bucket.

    Synchronous and blocking: run the methods in a thread, never in the
    reactor's. A missing key raises :class:`KeyError`, a malformed key
    :class:`ValueError`; S3's transient failures :class:`StoreUnavailable`
    (after retries), its refusals :class:`StoreError`.
    """

    uri: str

    def put_file(self, path: Path, key: str) -> None:
        """Store the file at ``path`` as ``key`` (replacing it); the file is
        left in place. Idempotent. Multipart on S3 above the threshold."""

    def put_bytes(self, key: str, data: bytes) -> None:
        """Store ``data`` as ``key`` (replacing it)."""

    def get(self, key: str) -> bytes:
        """The whole object."""

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset`` (fewer at the end of the object,
        none past it): one WARC record without fetching the file."""

    def exists(self, key: str) -> bool: ...

    def keys(self, prefix: str = "") -> Iterator[str]:
        """Keys starting with ``prefix`` (plain string prefix), in order."""


def check_key(key: str) -> str:
    """``key`` if it is a valid relative key (see the module docstring), else ValueError."""
    if not key or key.startswith("/") or "\\" in key or "\x00" in key:
        raise ValueError(f"bad store key {key!r}: a relative path with '/' separators")
    for segment in key.split("/"):
        if not segment or segment.startswith("."):
            raise ValueError(
                f"bad store key {key!r}: empty segments and segments starting with '.' "
                "(such as '..') are refused"
            )
    return key


def _check_range(offset: int, length: int) -> None:
    if offset < 0 or length < 0:
        raise ValueError(f"bad range: offset {offset} and length {length} must be >= 0")


class LocalStore:
    """Objects as files under ``root`` (``root/<key>``).

    A write goes to a hidden temporary file in the target's directory, is
    fsynced and renamed over the target (``os.replace``), then the directory is
    fsynced: readers never see a partial object, and a stored object survives a
    crash. Leftover temporary files (``.name.*.part``) of a crash are ignored.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        # Ends in "/" like S3Store's: logs print uri + key as the object's address.
        self.uri = self.root.as_uri().rstrip("/") + "/"

    def __repr__(self) -> str:
        return f"LocalStore({self.uri})"

    def path(self, key: str) -> Path:
        """Where ``key`` lives (no I/O)."""
        return self.root.joinpath(*check_key(key).split("/"))

    def put_file(self, path: Path, key: str) -> None:
        target = self.path(key)
        with open(path, "rb") as src:
            self._write(target, lambda out: shutil.copyfileobj(src, out, MIB))

    def put_bytes(self, key: str, data: bytes) -> None:
        self._write(self.path(key), lambda out: out.write(data))

    def _write(self, target: Path, fill: Callable[[Any], object]) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                fill(out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(target.parent)

    def get(self, key: str) -> bytes:
        try:
            return self.path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise KeyError(key) from None

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        _check_range(offset, length)
        try:
            with open(self.path(key), "rb") as f:
                f.seek(offset)
                return f.read(length)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise KeyError(key) from None

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def keys(self, prefix: str = "") -> Iterator[str]:
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = PurePosixPath(Path(dirpath).relative_to(self.root).as_posix())
            for name in filenames:
                if name.startswith("."):  # temporary files (and nothing a key can name)
                    continue
                key = name if rel == PurePosixPath(".") else f"{rel}/{name}"
                if key.startswith(prefix):
                    found.append(key)
        # Byte order of the UTF-8 keys, like S3's listing.
        yield from sorted(found, key=lambda k: k.encode())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class S3Store:
    """Objects ``<prefix><key>`` in an S3 bucket, through a boto3 client.

    ``put_file`` uses boto3's transfer manager: a multipart upload above
    ``transfer.multipart_threshold``, in parts of ``transfer.multipart_chunksize``,
    each part retried alone by botocore. An upload that fails for good is
    aborted by boto3 when S3 answers; one cut off by an outage may leave an
    incomplete multipart upload behind: give the bucket a lifecycle rule
    (AbortIncompleteMultipartUpload) to clear those.
    """

    # Keys per list_objects_v2 call (S3 answers at most 1,000).
    list_page_keys = 1000

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        transfer: TransferConfig,
        retry_attempts: int,
        retry_base_seconds: float,
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.transfer = transfer
        self.retry_attempts = retry_attempts
        self.retry_base_seconds = retry_base_seconds
        self.uri = f"s3://{bucket}/{prefix}"

    def __repr__(self) -> str:
        return f"S3Store({self.uri})"

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def put_file(self, path: Path, key: str) -> None:
        name = self._key(key)
        self._retrying(
            "upload",
            name,
            lambda: self.client.upload_file(str(path), self.bucket, name, Config=self.transfer),
        )

    def put_bytes(self, key: str, data: bytes) -> None:
        name = self._key(key)
        self._retrying(
            "put",
            name,
            lambda: self.client.put_object(Bucket=self.bucket, Key=name, Body=data),
        )

    def get(self, key: str) -> bytes:
        name = self._key(key)

        def fetch() -> bytes:
            answer = self.client.get_object(Bucket=self.bucket, Key=name)
            return bytes(answer["Body"].read())  # a cut stream is retried too

        return self._retrying("get", name, fetch, missing=key)

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        _check_range(offset, length)
        name = self._key(key)
        if length == 0:
            return b""
        byte_range = f"bytes={offset}-{offset + length - 1}"

        def fetch() -> bytes:
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=name, Range=byte_range)
            except Exception as exc:
                if _error_code(exc) == "InvalidRange":  # offset past the end
                    return b""
                raise
            return bytes(answer["Body"].read())

        return self._retrying("get", name, fetch, missing=key)

    def exists(self, key: str) -> bool:
        name = self._key(key)

        def head() -> bool:
            try:
                self.client.head_object(Bucket=self.bucket, Key=name)
            except Exception as exc:
                if _error_code(exc) in _NOT_FOUND_CODES:
                    return False
                raise
            return True

        return self._retrying("head", name, head)

    def keys(self, prefix: str = "") -> Iterator[str]:
        # One list_objects_v2 call per page of up to 1,000 keys, each retried
        # alone: an outage in the middle of a long listing does not restart it.
        full = self.prefix + prefix
        token: str | None = None
        while True:
            args: dict[str, Any] = {
                "Bucket": self.bucket,
                "Prefix": full,
                "MaxKeys": self.list_page_keys,
            }
            if token:
                args["ContinuationToken"] = token
            page = self._retrying("list", full, partial(self.client.list_objects_v2, **args))
            for item in page.get("Contents", ()):
                yield item["Key"][len(self.prefix) :]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def _retrying(self, what: str, name: str, call: Callable[[], T], missing: str = "") -> T:
        """``call()``, retried on transient failures (see the module docstring)."""
        where = f"s3://{self.bucket}/{name}"
        for attempt in range(self.retry_attempts + 1):
            try:
                return call()
            except Exception as exc:
                if not _is_boto_error(exc):  # e.g. the local file is missing
                    raise
                if missing and _error_code(exc) in _NOT_FOUND_CODES:
                    raise KeyError(missing) from None
                if not _is_transient(exc):
                    raise StoreError(f"S3 {what} {where} refused: {_describe(exc)}") from exc
                if attempt == self.retry_attempts:
                    raise StoreUnavailable(
                        f"S3 {what} {where} failed {attempt + 1} times: {_describe(exc)}"
                    ) from exc
                sleep = min(
                    RETRY_MAX_SLEEP_SECONDS,
                    self.retry_base_seconds * 2**attempt * random.uniform(0.5, 1.0),
                )
                logger.warning(
                    "S3 %s %s failed (%s): retry %d of %d in %.2f s",
                    what, where, _describe(exc), attempt + 1, self.retry_attempts, sleep,
                )  # fmt: skip
                time.sleep(sleep)
        raise AssertionError("unreachable")


def _client_error(exc: BaseException) -> BaseException:
    """The botocore error behind boto3's S3UploadFailedError (which wraps a ClientError)."""
    from boto3.exceptions import S3UploadFailedError

    if isinstance(exc, S3UploadFailedError) and exc.__context__ is not None:
        return exc.__context__
    return exc


def _is_boto_error(exc: BaseException) -> bool:
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError

    return isinstance(exc, BotoCoreError | ClientError | Boto3Error)


def _error_code(exc: BaseException) -> str:
    from botocore.exceptions import ClientError

    exc = _client_error(exc)
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def _is_transient(exc: BaseException) -> bool:
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, SSLError

    exc = _client_error(exc)
    if isinstance(exc, SSLError):  # a certificate problem: configuration, not an outage
        return False
    if isinstance(exc, ConnectionError | HTTPClientError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return status >= 500 or status == 429 or _error_code(exc) in _TRANSIENT_CODES
    return False


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class StoreConfig:
    """The body store settings (``CRAWL_STORE_*`` and Scrapy's ``AWS_*``),
    read once and checked together. Credentials are kept out of ``repr``."""

    uri: str
    local_root: Path | None
    bucket: str
    prefix: str
    multipart_threshold_bytes: int
    multipart_chunk_bytes: int
    retry_attempts: int
    retry_base_seconds: float
    endpoint_url: str | None = None
    region_name: str | None = None
    use_ssl: bool | None = None
    verify: bool | str | None = None
    max_pool_connections: int = 10
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @property
    def is_s3(self) -> bool:
        return self.local_root is None

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> StoreConfig:
        uri = crawl_setting(settings, "CRAWL_STORE_URI")
        if not uri:
            root = Path(crawl_setting(settings, "CRAWL_DATA_DIR"), "bodies").absolute()
            uri = root.as_uri()
        local_root, bucket, prefix = parse_store_uri(str(uri))
        config = cls(
            uri=str(uri),
            local_root=local_root,
            bucket=bucket,
            prefix=prefix,
            multipart_threshold_bytes=crawl_setting(
                settings, "CRAWL_STORE_MULTIPART_THRESHOLD_BYTES"
            ),
            multipart_chunk_bytes=crawl_setting(settings, "CRAWL_STORE_MULTIPART_CHUNK_BYTES"),
            retry_attempts=crawl_setting(settings, "CRAWL_STORE_RETRY_ATTEMPTS"),
            retry_base_seconds=crawl_setting(settings, "CRAWL_STORE_RETRY_BASE_SECONDS"),
            endpoint_url=settings.get("AWS_ENDPOINT_URL") or None,
            region_name=settings.get("AWS_REGION_NAME") or None,
            use_ssl=_optional_bool(settings, "AWS_USE_SSL"),
            verify=_verify(settings.get("AWS_VERIFY")),
            max_pool_connections=(
                settings.getint("AWS_MAX_POOL_CONNECTIONS")
                or settings.getint("REACTOR_THREADPOOL_MAXSIZE", 10)
            ),
            access_key_id=settings.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=settings.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=settings.get("AWS_SESSION_TOKEN") or None,
        )
        config.validate()
        return config

    def validate(self) -> None:
        if self.multipart_threshold_bytes < 1:
            raise ConfigError("CRAWL_STORE_MULTIPART_THRESHOLD_BYTES must be >= 1")
        if not S3_MIN_PART_BYTES <= self.multipart_chunk_bytes <= S3_MAX_PART_BYTES:
            raise ConfigError(
                f"CRAWL_STORE_MULTIPART_CHUNK_BYTES must be between {S3_MIN_PART_BYTES} (5 MiB) "
                f"and {S3_MAX_PART_BYTES} (5 GiB): S3's limits on a part"
            )
        if self.retry_attempts < 0:
            raise ConfigError("CRAWL_STORE_RETRY_ATTEMPTS must be >= 0 (0: no outer retries)")
        if self.retry_base_seconds < 0:
            raise ConfigError("CRAWL_STORE_RETRY_BASE_SECONDS must be >= 0")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ConfigError(
                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither "
                "(boto3's credential chain)"
            )
        if self.session_token and not self.access_key_id:
            raise ConfigError("AWS_SESSION_TOKEN needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
        if self.max_pool_connections < 1:
            raise ConfigError("AWS_MAX_POOL_CONNECTIONS must be >= 1")


def parse_store_uri(uri: str) -> tuple[Path | None, str, str]:
    """``(local_root, "", "")`` for a directory, ``(None, bucket, prefix)`` for
    S3 (the prefix empty or ending in ``/``); ConfigError if malformed."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme == "" and "://" not in uri and uri.strip():
        return Path(uri).absolute(), "", ""
    if scheme == "file":
        if parts.netloc not in _LOCAL_HOSTS or not parts.path.startswith("/"):
            raise ConfigError(
                f"CRAWL_STORE_URI {uri!r}: a file URI names an absolute path, "
                "file:///dir (or give a plain path)"
            )
        if parts.query or parts.fragment:
            raise ConfigError(f"CRAWL_STORE_URI {uri!r}: no query or fragment allowed")
        return Path(unquote(parts.path)), "", ""
    if scheme == "s3":
        if "@" in parts.netloc:
            # Never in a URI: it is logged. Keys go in AWS_* settings or boto3's chain.
            raise ConfigError(
                "CRAWL_STORE_URI: credentials in an s3:// URI are refused; set "
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or use boto3's credential chain"
            )
        bucket = parts.netloc
        if not bucket:
            raise ConfigError(f"CRAWL_STORE_URI {uri!r}: no bucket; expected s3://bucket/prefix")
        if not _BUCKET_RE.fullmatch(bucket) or ".." in bucket:
            raise ConfigError(
                f"CRAWL_STORE_URI {uri!r}: bad bucket name {bucket!r} (3-63 characters: "
                "lowercase letters, digits, '.' and '-')"
            )
        if parts.query or parts.fragment:
            raise ConfigError(f"CRAWL_STORE_URI {uri!r}: no query or fragment allowed")
        prefix = unquote(parts.path).strip("/")
        if prefix:
            try:
                check_key(prefix)
            except ValueError:
                raise ConfigError(
                    f"CRAWL_STORE_URI {uri!r}: bad prefix {prefix!r} (empty or '.' segments)"
                ) from None
            prefix += "/"
        return None, bucket, prefix
    raise ConfigError(
        f"CRAWL_STORE_URI {uri!r}: unknown scheme {parts.scheme!r}; expected file:///dir, "
        "s3://bucket/prefix or a plain path"
    )


def _optional_bool(settings: BaseSettings, name: str) -> bool | None:
    if settings.get(name) is None:
        return None
    try:
        return settings.getbool(name)
    except ValueError:
        raise ConfigError(f"{name} must be a boolean, got {settings.get(name)!r}") from None


def _verify(value: object) -> bool | str | None:
    """AWS_VERIFY: unset, a boolean (also as text) or the path of a CA bundle."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lower() in {"1", "true", "yes", "on"}:
        return True
    if text.lower() in {"0", "false", "no", "off"}:
        return False
    return text or None


def open_store(config: StoreConfig) -> BodyStore:
    """The store ``config`` names; for S3, its boto3 client (no request yet).

    Each S3 store gets its own boto3 session: nothing process-wide is touched.
    """
    if config.local_root is not None:
        logger.info("Body store: %s", config.uri)
        return LocalStore(config.local_root)
    import boto3.session
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

    client_args: dict[str, Any] = {
        "aws_access_key_id": config.access_key_id,
        "aws_secret_access_key": config.secret_access_key,
        "aws_session_token": config.session_token,
        "endpoint_url": config.endpoint_url,
        "region_name": config.region_name,
        "verify": config.verify,
        "config": Config(
            # botocore's own retries; AWS_MAX_ATTEMPTS (environment) sets how many.
            retries={"mode": "standard"},
            connect_timeout=S3_CONNECT_TIMEOUT_SECONDS,
            max_pool_connections=config.max_pool_connections,
        ),
    }
    if config.use_ssl is not None:
        client_args["use_ssl"] = config.use_ssl
    client = boto3.session.Session().client("s3", **client_args)
    transfer = TransferConfig(
        multipart_threshold=config.multipart_threshold_bytes,
        multipart_chunksize=config.multipart_chunk_bytes,
        max_concurrency=config.max_pool_connections,
    )
    logger.info(
        "Body store: %s (endpoint %s, region %s)",
        config.uri, client.meta.endpoint_url, client.meta.region_name,
    )  # fmt: skip
    return S3Store(
        client,
        config.bucket,
        config.prefix,
        transfer,
        config.retry_attempts,
        config.retry_base_seconds,
    )
