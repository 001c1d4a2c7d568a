"""Reading the frontier scripts' replies (crawlproject/frontier/client.py):
Redis answers bytes or text, list entries carry a stored request."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

from crawlproject.frontier.entries import Lease


def group_by_shard(leases: Sequence[Lease]) -> dict[int, list[int]]:
    by_shard: dict[int, list[int]] = defaultdict(list)
    for lease in leases:
        by_shard[lease.shard].append(lease.id)
    return by_shard


def entry_url(entry: bytes, credit: bool) -> str:
    """The URL of a ``host \\t band \\t item`` list entry (``parked``, ``poison``)."""
    item = entry.split(b"\t", 2)[2]
    if credit:  # fingerprint (8 bytes), credit \t L at enqueue \t request
        item = item[8:].split(b"\t", 2)[2]
    try:
        return str(json.loads(item)["url"])
    except (ValueError, KeyError, TypeError):
        return item.decode("utf-8", "replace")  # undecodable: shown as stored


def host_and_shape(line: str) -> tuple[str, str]:
    host, _, shape = line.rpartition("\t")
    return host, shape


def reply_lines(value: bytes | str) -> list[str]:
    text = reply_text(value)
    return text.split("\n") if text else []


def reply_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def reply_text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
