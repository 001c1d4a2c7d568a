"""Reading the frontier scripts' replies (crawlproject/frontier/store/redis_frontier.py):
Redis answers bytes or text, list entries carry a stored request."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from crawlproject.frontier.store.codec import url_of, whole_form
from crawlproject.frontier.store.operation_values import Lease


def group_by_shard(leases: Sequence[Lease]) -> dict[int, list[int]]:
    by_shard: dict[int, list[int]] = defaultdict(list)
    for lease in leases:
        by_shard[lease.shard].append(lease.id)
    return by_shard


def entry_url(entry: bytes, credit: bool) -> str:
    """The URL of a ``host \\t band \\t item`` list entry (``parked``, ``poison``)."""
    host, _, rest = entry.partition(b"\t")
    item = rest.partition(b"\t")[2]
    if credit:  # fingerprint (8 bytes), c and Lq (8 bytes each), request
        item = item[24:]
    url = url_of(whole_form(item, host.decode("utf-8", "replace")))
    return url if url is not None else item.decode("utf-8", "replace")  # shown as stored


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
