"""A body store in a local directory: ``CRAWL_STORE_URI`` unset (then
``<CRAWL_DATA_DIR>/bodies``), ``file:///abs/dir`` or a plain path."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from crawlproject.store.base import check_key, check_range
from crawlproject.store.rolling import fsync_directory

# put_file copies a spooled file into the store this much at a time.
COPY_CHUNK_BYTES = 1024 * 1024


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
            self._write(target, lambda out: shutil.copyfileobj(src, out, COPY_CHUNK_BYTES))

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
        fsync_directory(target.parent)

    def get(self, key: str) -> bytes:
        try:
            return self.path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise KeyError(key) from None

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        check_range(offset, length)
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
