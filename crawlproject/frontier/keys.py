"""The frontier's Redis key schema: every key, in one place.

A crawl named ``C`` is split into ``S`` shards (``CRAWL_FRONTIER_SHARDS``); a
politeness key (``http://host:port`` or a registered domain) lives in shard
``crc32(key) % S``. All keys of a shard carry the hash tag ``{C/s}``, so all
keys of one host share one Redis Cluster slot and no script crosses slots.

Per shard, prefix ``cp:{C/s}:``

``ready``          ZSET  politeness key -> earliest fetch time (ms, Redis clock).
                         A key is present iff its queue is non-empty and it
                         has a free slot (Mercator's back-queue heap).
``q:<pkey>``       LIST  encoded requests (compact JSON) of one politeness key, FIFO.
``h:<pkey>``       HASH  ``inflight`` (slots taken), ``next`` (ms); the host's
                         own ``delay`` (ms) / ``conc`` when configured; ``rdelay``
                         (ms, its robots.txt Crawl-delay); ``pen`` (ms, the
                         429/503 backoff penalty, halved by each normal answer).
``lease``          HASH  lease id -> ``state \\t worker \\t pkey \\t request``;
                         state ``f`` = fetching (holds the slot), ``p`` =
                         processing (slot freed, links not yet stored).
``leases``         ZSET  lease id -> expiry (ms). Live workers renew; expired
                         leases are reclaimed: URL back to its queue head.
``seq``            STRING lease id counter.
``seen:<bucket>``  STRING seen-URL fingerprints, 6 bytes each, packed back to
                         back; bucket = top ``CRAWL_SEEN_BUCKET_BITS`` bits.
``dead``           LIST  stored requests that could not be decoded.
``n``              HASH  counters: ``queued``, ``leased`` (gauges); ``enqueued``,
                         ``seen_hits``, ``claims``, ``releases``, ``done``,
                         ``reclaimed``, ``deferred`` (totals).
``r:<origin>``     HASH  robots.txt of ``scheme://host[:port]`` (in the shard of
                         the origin's politeness key), shared by the fleet:
                         ``k`` kind (ok | unavailable | unreachable), ``s`` HTTP
                         status (0: no answer), ``b`` body (zlib), ``g`` last good
                         body (zlib, for a long outage), ``f`` fetched (ms),
                         ``x`` expires / retry due (ms), ``n`` failed fetches in
                         a row, ``o`` outage start (ms). Redis TTL: until ``x``
                         plus the outage window (the last good copy outlives it).
``rl:<origin>``    STRING robots.txt fetch lock: the fetching worker's id, with a
                         TTL (SET NX PX), so one worker fetches for the fleet.

Per crawl, prefix ``cp:{C}:``

``meta``           HASH  ``shards``, ``seen_bucket_bits`` (fixed at creation), ``created``.
``workers``        ZSET  worker id -> last heartbeat (ms, Redis clock).
``scope``          SET   scope roots (hosts or registered domains) of all seeds.

And ``C:start_urls`` LIST: as in scrapy-redis, ``LPUSH web:start_urls URL``
(or a JSON object ``{"url": ..., "meta": {...}}``) adds a seed to crawl ``web``.

Values are JSON or plain strings, never pickle.
"""

from __future__ import annotations

import re
import zlib

CRAWL_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class CrawlKeys:
    """Builds the key names of one crawl."""

    def __init__(self, crawl: str, shards: int) -> None:
        if not CRAWL_NAME_RE.match(crawl):
            raise ValueError(
                f"crawl name {crawl!r} must be 1-64 characters of letters, digits, _ . -"
            )
        if shards < 1:
            raise ValueError("CRAWL_FRONTIER_SHARDS must be at least 1")
        self.crawl = crawl
        self.shards = shards
        self.crawl_prefix = f"cp:{{{crawl}}}:"
        self.meta = self.crawl_prefix + "meta"
        self.workers = self.crawl_prefix + "workers"
        self.scope = self.crawl_prefix + "scope"
        self.start_urls = f"{crawl}:start_urls"
        self.shard_prefixes = [f"cp:{{{crawl}/{s}}}:" for s in range(shards)]

    def shard_of(self, pkey: str) -> int:
        return zlib.crc32(pkey.encode("utf-8")) % self.shards

    def ready(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "ready"

    def counters(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "n"

    def queue(self, shard: int, pkey: str) -> str:
        return self.shard_prefixes[shard] + "q:" + pkey

    def robots(self, shard: int, origin: str) -> str:
        return self.shard_prefixes[shard] + "r:" + origin

    def robots_lock(self, shard: int, origin: str) -> str:
        return self.shard_prefixes[shard] + "rl:" + origin

    def all_patterns(self) -> list[str]:
        """Glob patterns matching every key of the crawl (for ``crawlproject reset``)."""
        return [
            self.crawl_prefix + "*",
            *(p + "*" for p in self.shard_prefixes),
            self.start_urls,
        ]
