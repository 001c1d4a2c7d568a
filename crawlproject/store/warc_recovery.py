"""The WARC files a worker's spool holds: finished ones, and the ``.open`` files
a killed writer left, made readable again (warc.py's module doc: recovery).

Every complete gzip member of a file left ``.open`` is kept and the torn tail
cut off; a file left with no record but its warcinfo holds no page and is
deleted. Files a live writer holds (``flock``) are skipped. The uploader
(uploader.py) runs this at its start.
"""

from __future__ import annotations

import io
import re
import zlib
from pathlib import Path

from crawlproject.store.rolling import RECOVERY_READ_BYTES
from crawlproject.store.rolling import recover_open_files as rolling_recover
from crawlproject.store.warc import WARC_SUFFIX

# Recovery reads the file in chunks (RECOVERY_READ_BYTES) and inflates with a
# cap on the output of one call, so a member of highly compressible data cannot
# balloon memory.
RECOVERY_INFLATE_MAX_BYTES = 1 << 20
# The WARC header block of a record fits in this much of its member's inflated start.
RECORD_HEAD_BYTES = 8192

_WARC_TYPE_RE = re.compile(rb"\r\nWARC-Type:[ \t]*([^\r\n]*)", re.IGNORECASE)
# The record types of a file that carry no page: such a file is not worth keeping.
_NON_PAGE_TYPES = frozenset({b"warcinfo"})


def finished_files(directory: Path, prefix: str | None = None) -> list[Path]:
    """Finished WARC files in ``directory`` (of one writer's ``prefix``), oldest name first."""
    return sorted(
        path
        for path in directory.glob(f"*{WARC_SUFFIX}")
        if prefix is None or path.name.startswith(f"{prefix}-")
    )


def recover_open_files(directory: Path, prefix: str | None = None) -> list[Path]:
    """Finish the ``.open`` files a killed writer left (warc.py's module doc: recovery).

    Keeps each file's complete gzip members, cuts the rest, renames it to
    ``.warc.gz`` and returns the renamed paths; deletes a file without a page.
    Skips files a live writer holds. Run it before a new writer starts writing.
    """
    return rolling_recover(directory, WARC_SUFFIX, "WARC", _whole_records, prefix)


def _whole_records(fd: int, size: int) -> tuple[int, str]:
    """Bytes of the complete gzip members (none when they hold no page)."""
    with open(fd, "rb", closefd=False) as stream:
        good_bytes, record_types = _complete_members(stream)
    if not any(kind not in _NON_PAGE_TYPES for kind in record_types):
        return 0, "no page"
    return good_bytes, f"{len(record_types)} records"


def _complete_members(stream: io.BufferedReader) -> tuple[int, list[bytes]]:
    """(end offset of the last complete gzip member before the first bad byte,
    WARC-Type of each complete member). A member is complete when it inflates
    to its end and its trailer's CRC-32 and length check out."""
    good_end = 0
    position = 0  # input consumed so far, in bytes
    kinds: list[bytes] = []
    inflater = zlib.decompressobj(wbits=31)
    head = b""
    while data := stream.read(RECOVERY_READ_BYTES):
        while True:
            try:
                out = inflater.decompress(data, RECOVERY_INFLATE_MAX_BYTES)
            except zlib.error:  # not gzip, or a trailer that does not check out
                return good_end, kinds
            if len(head) < RECORD_HEAD_BYTES:
                head += out[: RECORD_HEAD_BYTES - len(head)]
            if inflater.eof:
                rest = inflater.unused_data
                position += len(data) - len(rest)
                good_end = position
                match = _WARC_TYPE_RE.search(head)
                kinds.append(match.group(1).strip().lower() if match else b"")
                inflater = zlib.decompressobj(wbits=31)
                head = b""
                data = rest
                if not data:
                    break
                continue
            tail = inflater.unconsumed_tail
            position += len(data) - len(tail)
            data = tail
            # No input left and output not capped: the member goes on in the next chunk.
            # (Capped output with no input left may still hold inflated bytes: go on.)
            if not data and len(out) < RECOVERY_INFLATE_MAX_BYTES:
                break
    return good_end, kinds
