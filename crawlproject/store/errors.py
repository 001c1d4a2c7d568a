"""How a body store fails: the store cannot be reached, or it refuses.

S3 failures are sorted in two, and the uploader (uploader.py) acts on the sort:

* the store cannot be reached (connection refused or closed, timeouts, 5xx and
  throttling answers, :func:`is_transient`): retried with exponential backoff
  ``CRAWL_STORE_RETRY_ATTEMPTS`` times (s3.py), then :class:`StoreUnavailable`
  is raised and the caller keeps its file spooled on local disk and tries
  again later;
* a refusal (no such bucket, access denied, a bad request, a certificate
  problem) raises :class:`StoreError` at once, as retrying cannot help.

botocore is imported only when an error is looked at: a worker storing to a
local directory never loads it.
"""

from __future__ import annotations

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
NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound"})


class StoreUnavailable(Exception):
    """The store could not be reached after the bounded retries: the caller
    keeps its file spooled and tries again later."""


class StoreError(Exception):
    """The store refused the operation (no such bucket, access denied, …):
    retrying will not help; the configuration or the store needs fixing."""


def _client_error(exc: BaseException) -> BaseException:
    """The botocore error behind boto3's S3UploadFailedError (which wraps a ClientError)."""
    from boto3.exceptions import S3UploadFailedError

    if isinstance(exc, S3UploadFailedError) and exc.__context__ is not None:
        return exc.__context__
    return exc


def is_boto_error(exc: BaseException) -> bool:
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError

    return isinstance(exc, BotoCoreError | ClientError | Boto3Error)


def error_code(exc: BaseException) -> str:
    from botocore.exceptions import ClientError

    exc = _client_error(exc)
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def is_transient(exc: BaseException) -> bool:
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, SSLError

    exc = _client_error(exc)
    if isinstance(exc, SSLError):  # a certificate problem: configuration, not an outage
        return False
    if isinstance(exc, ConnectionError | HTTPClientError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return status >= 500 or status == 429 or error_code(exc) in _TRANSIENT_CODES
    return False


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
