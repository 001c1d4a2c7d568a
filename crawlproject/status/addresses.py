"""``crawlproject status``: the addresses at their cap and the hosts waiting on one.

Politeness per server (docs/frontier.md) keeps, on each address's home shard,
an index of the busy addresses (``afull``: at their cap; ``aqd``: with hosts
waiting, crawlproject/frontier/store/keys.py). This reads the busiest of them:
an address shown at its cap with many hosts waiting is a shared host (or a
CDN) the crawl is queuing behind; ``CRAWL_ADDRESS_OVERRIDES`` can give its
network more places, or none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from crawlproject.frontier.store.keys import CrawlKeys

ADDRESSES_SHOWN = 20  # per list, the busiest first
HOSTS_SHOWN = 5  # waiting hosts named per address, the longest waiting first


async def collect_addresses(
    redis: Redis, keys: CrawlKeys, counters: dict[str, int], now_ms: int
) -> dict[str, Any]:
    """The ``addresses`` section of the status (see the module docstring)."""
    pipe = redis.pipeline(transaction=False)
    for shard in range(keys.shards):
        pipe.zrevrange(keys.addresses_full(shard), 0, ADDRESSES_SHOWN - 1)
        pipe.zrevrange(keys.addresses_waited_on(shard), 0, ADDRESSES_SHOWN - 1, withscores=True)
    replies = await pipe.execute()
    full: list[tuple[int, str]] = []
    waited: list[tuple[int, str, float]] = []
    for shard in range(keys.shards):
        full += [(shard, display_text(a)) for a in replies[2 * shard]]
        waited += [(shard, display_text(a), n) for a, n in replies[2 * shard + 1]]
    waited.sort(key=lambda w: -w[2])
    waited = waited[:ADDRESSES_SHOWN]
    # Places whose lease expired (a dead worker's) are left out until a
    # script at the address drops them.
    pipe = redis.pipeline(transaction=False)
    for shard, address in full:
        pipe.zcount(keys.address_places(shard, address), f"({now_ms}", "+inf")
    for shard, address, _ in waited:
        pipe.zrange(keys.address_waiting(shard, address), 0, HOSTS_SHOWN - 1)
    more = await pipe.execute()
    live = [(a, int(n)) for (_, a), n in zip(full, more, strict=False) if n]
    live.sort(key=lambda row: -row[1])
    at_cap = [{"address": a, "in_flight": n} for a, n in live[:ADDRESSES_SHOWN]]
    waiting_hosts = more[len(full) :]
    return {
        "taken": counters.get("address_taken", 0),
        "denied": counters.get("address_denied", 0),
        "woken": counters.get("address_woken", 0),
        "at_cap": at_cap,
        "waited_on": [
            {"address": a, "hosts_waiting": int(n), "first": [display_text(h) for h in hosts]}
            for (_, a, n), hosts in zip(waited, waiting_hosts, strict=True)
        ],
    }


def address_tables(section: dict[str, Any]) -> list[Any]:
    """The section as rich tables (none when no address is busy)."""
    from rich.table import Table

    tables: list[Any] = []
    if section["at_cap"]:
        table = Table(title="addresses at their cap")
        table.add_column("address")
        table.add_column("in flight", justify="right")
        for row in section["at_cap"]:
            table.add_row(row["address"], str(row["in_flight"]))
        tables.append(table)
    if section["waited_on"]:
        table = Table(title="hosts waiting on an address")
        table.add_column("address")
        table.add_column("hosts waiting", justify="right")
        table.add_column("waiting longest")
        for row in section["waited_on"]:
            table.add_row(row["address"], str(row["hosts_waiting"]), ", ".join(row["first"]))
        tables.append(table)
    return tables


def display_text(value: bytes | str) -> str:
    """A Redis reply as text for the status page: bytes that are not UTF-8 are
    shown replaced, never raised (frontier.replies.reply_text is strict)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
