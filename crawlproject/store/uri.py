"""``CRAWL_STORE_URI``: a directory (``file:///abs/dir`` or a plain path) or a
bucket and prefix (``s3://bucket/prefix``), checked once at start."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from crawlproject.setting_values import ConfigError
from crawlproject.store.base import check_key

# A DNS-style bucket name (the rules of S3 general purpose buckets).
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_LOCAL_HOSTS = frozenset({"", "localhost"})


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
