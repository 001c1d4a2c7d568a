"""Which form of host key a crawl's keys were built with (meta ``host_keys``).

Host keys are servers, ``host[:port]``: http and https of one host share one
politeness slot (crawlproject/frontier/basics/urls.py ``host_key``). Crawls made
before had ``scheme://host[:port]`` keys, so their queues, robots.txt records
and host states live under names this version never computes: such a crawl
is refused with one line (in host and address modes; a registered domain,
the ``domain`` mode's key, did not change). The field is written before the
frontier's other layout fields (``RedisFrontier.prepare`` writes ``shards``),
so a crawl with ``shards`` and no ``host_keys`` is an old one, never a new
one another worker is creating at this moment.
"""

from __future__ import annotations

from redis.asyncio import Redis

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.operation_values import FrontierMismatch
from crawlproject.frontier.store.script_replies import reply_text

HOST_KEYS = "server"


async def adopt_host_keys(redis: Redis, keys: CrawlKeys, politeness: str) -> None:
    """Records this version's host key form in a new crawl, or checks an
    existing crawl's; FrontierMismatch (one line) when they differ."""
    before = await redis.hgetall(keys.meta)
    if b"shards" in before and b"host_keys" not in before:
        if politeness == "domain":
            return  # registered-domain keys are as they were
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} was created with scheme://host politeness keys (before "
            "http and https of a host shared one slot); finish it with that version, or use "
            "another crawl name"
        )
    await redis.hsetnx(keys.meta, "host_keys", HOST_KEYS)
    have = reply_text(await redis.hget(keys.meta, "host_keys") or b"")
    if have != HOST_KEYS:
        raise FrontierMismatch(
            f"crawl {keys.crawl!r} was created with host_keys={have}; this worker has "
            f"{HOST_KEYS}. Use another crawl name."
        )
