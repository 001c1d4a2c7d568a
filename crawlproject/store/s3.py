"""A body store in an S3 bucket (``s3://bucket/prefix``), through boto3.

The client takes Scrapy's ``AWS_*`` settings (keys, session token,
``AWS_ENDPOINT_URL`` for MinIO and other S3-compatible stores,
``AWS_REGION_NAME``, ``AWS_USE_SSL``, ``AWS_VERIFY``) and, for any left unset,
boto3's usual chain (``AWS_*`` environment variables, ``~/.aws`` files,
instance roles). ``AWS_MAX_ATTEMPTS`` in the environment sets botocore's own
retries (standard mode, 3 attempts by default). Above those, each call is
retried on the transient failures errors.py names, with exponential backoff.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from crawlproject.store.base import check_key, check_range
from crawlproject.store.errors import (
    NOT_FOUND_CODES,
    StoreError,
    StoreUnavailable,
    describe,
    error_code,
    is_boto_error,
    is_transient,
)

if TYPE_CHECKING:
    from boto3.s3.transfer import TransferConfig

    from crawlproject.store.config import StoreConfig

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A connection that is not accepted within this long counts as an outage
# (botocore's default, 60 s, would hold a thread a minute per attempt).
S3_CONNECT_TIMEOUT_SECONDS = 10.0
# Longest single wait of the outer retry loop.
RETRY_MAX_SLEEP_SECONDS = 60.0


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
        check_range(offset, length)
        name = self._key(key)
        if length == 0:
            return b""
        byte_range = f"bytes={offset}-{offset + length - 1}"

        def fetch() -> bytes:
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=name, Range=byte_range)
            except Exception as exc:
                if error_code(exc) == "InvalidRange":  # offset past the end
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
                if error_code(exc) in NOT_FOUND_CODES:
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
                if not is_boto_error(exc):  # e.g. the local file is missing
                    raise
                if missing and error_code(exc) in NOT_FOUND_CODES:
                    raise KeyError(missing) from None
                if not is_transient(exc):
                    raise StoreError(f"S3 {what} {where} refused: {describe(exc)}") from exc
                if attempt == self.retry_attempts:
                    raise StoreUnavailable(
                        f"S3 {what} {where} failed {attempt + 1} times: {describe(exc)}"
                    ) from exc
                sleep = min(
                    RETRY_MAX_SLEEP_SECONDS,
                    self.retry_base_seconds * 2**attempt * random.uniform(0.5, 1.0),
                )
                logger.warning(
                    "S3 %s %s failed (%s): retry %d of %d in %.2f s",
                    what, where, describe(exc), attempt + 1, self.retry_attempts, sleep,
                )  # fmt: skip
                time.sleep(sleep)
        raise AssertionError("unreachable")


def open_s3_store(config: StoreConfig) -> S3Store:
    """The bucket ``config`` names, with its own boto3 session and client (no
    request yet): nothing process-wide is touched."""
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
