"""What a body store is (:class:`BodyStore`) and what a key may be.

Keys are relative paths (``crawl/2026/11/file.warc.gz``): segments separated by
``/``, none empty or starting with ``.`` (so no ``..``, and a key names the same
object on every backend). Stores write whole objects only: a reader sees the
old object or the new one, never a part.

Every method blocks (disk or network I/O): callers in the reactor run them in a
thread, never in the reactor's own. The backends: local.py (a directory) and
s3.py (a bucket); factory.py opens the one the settings name (config.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol


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


def check_range(offset: int, length: int) -> None:
    if offset < 0 or length < 0:
        raise ValueError(f"bad range: offset {offset} and length {length} must be >= 0")
