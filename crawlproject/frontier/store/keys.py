"""The frontier's Redis key schema: every key, in one place.

A crawl named ``C`` is split into ``S`` shards (``CRAWL_FRONTIER_SHARDS``); a
politeness key (the server, ``host[:port]``: http and https of one host share
it; or a registered domain) lives in shard ``crc32(key) % S``; an IP address's
counters live in shard ``crc32(address) % S``, its *home* (politeness per
server, docs/frontier.md). All keys of shard s carry its hash tag ``{T}``, so all
keys of one host (or address) share one Redis Cluster slot and no script crosses
slots: ``T`` = ``C/s~n``, the first n >= 1 (or ``C/s``) putting tag s in the
first 16 slots of the s-th of S equal runs of the 16,384 slots (meta
``shard_tags`` = ``even``, frontier/store/hash_slots.py); in a crawl made before (no
``shard_tags``) ``C/s``. The scripts are given the
prefix (never build a tag); each declares its shard's ``ready`` and
``slotguard`` keys (:meth:`CrawlKeys.script_keys`), and builds the others from
the shard prefix: ``slotguard`` is never written, so while the shard's slot
migrates Redis refuses the script before it runs (TRYAGAIN, or ASK then
TRYAGAIN) and no script is left half-applied by a key that moved.

Per shard, prefix ``cp:{T}:``

``ready``          ZSET  politeness key -> earliest fetch time (ms, Redis clock):
                         hosts with queued URLs and a free slot that must
                         still wait (Mercator's back-queue heap).
``due:<band>``     LIST  politeness keys of the hosts whose time has come (claim
                         moves them from ``ready``; a host that may be fetched at
                         once goes straight here), by their best band, first due
                         first; the host's ``qb`` names its due band, an entry
                         that does not match it (the host moved to a better band,
                         was claimed or must wait again) is stale and skipped. A
                         host is in ``ready`` or due (or neither) iff its queue
                         is non-empty and it has a free slot.
``db``             STRING bit mask of the bands whose ``due:<band>`` list may
                         hold entries (bit b: band b).
``q:<pkey>:<band>`` LIST score mode: one priority band (0..31, 0 first) of the
                         host's queue, FIFO (Mercator's front queues, per host), of
                         requests in codec.py's compact form, their URL after the
                         host key and its ``/`` (``path`` for ``http://<pkey>/path``,
                         ``/path`` when the path starts with a digit; ``/path``
                         always in a list written before 2026-12-08, still read):
                         a link of the web spider is a tag byte, its depth and that.
``q:<pkey>``       LIST  score mode, a small host (``qc`` set; at most 32
                         entries): its whole queue in one list, its bands'
                         segments in band order, FIFO within a band, each segment
                         but the first after its band's marker (the band in
                         decimal, 2 bytes in a listpack; byte 255 then the band
                         as a byte in a list written before 2026-12-08, still
                         read; the first segment's band is the first in ``qb``'s
                         mask); past 32 entries it turns to
                         ``q:<pkey>:<band>`` lists, and back once empty (a Redis
                         list key costs ~180 B before its first URL, _queue.lua).
``q:<pkey>``       ZSET  credit mode (AOPIC): the host's queue, URL fingerprint
                         (8 bytes) -> c, the credit it received from links, in
                         units of 1e-12 (an integer); claims take the highest
                         first (equal credits in fingerprint order); its band is
                         band_of(c).
``b:<pkey>``       HASH  credit mode, per queued URL: field fingerprint -> L at
                         enqueue (8-byte big-endian double) .. request (compact,
                         as above); its credit at claim is c + L - L at enqueue.
``mode``           STRING ``score`` or ``credit`` (CRAWL_PRIORITY_POLICY's mode), set by
                         every worker, read by the scripts; fixed per crawl.
``qseq``           STRING counter of the keys given to dont_filter copies of a
                         queued URL (credit mode).
``h:<pkey>``       HASH  ``inflight`` (slots taken), ``next`` (ms); the host's
                         own ``delay`` (ms) / ``conc`` when configured; ``rdelay``
                         (ms, its robots.txt Crawl-delay); ``pen`` (ms, the
                         429/503 backoff penalty, halved by each normal answer);
                         ``ft`` (ms, its last answer's time: the adaptive delay
                         takes the smaller of it and the next one's);
                         ``parked`` (set aside as a trap: new URLs go to ``parked``);
                         ``qb`` (its non-empty bands and its due band: mask +
                         2^32 x d, mask bit b = band b (credit mode: the band of
                         its best URL), d = due band + 1 while it is due, else
                         0; missing, or 0, when both are 0); ``qc`` (score
                         mode: 1 while its queue is one list, ``q:<pkey>``); ``urls``
                         (URLs queued over the crawl, with CRAWL_MAX_PAGES_PER_HOST
                         or CRAWL_HOST_BUDGET); ``capped`` / ``pcapped`` /
                         ``budgeted`` (a cap or its budget was reported for it);
                         ``seed`` (a seed's host) / ``scoped`` (a host of the crawl's
                         scope, operator_scope.py): the operator's, no budget; ``ts``
                         (its contained token shapes, 8 bytes each, at most 16);
                         ``aw`` / ``awn`` (waiting for a place at its address: the
                         deadline, and its own next time; address_wait.lua and
                         address_wake.lua); ``awk`` (woken before it began to
                         wait: the time it may come).
``pp:<pkey>``      HASH  URL shape (8 bytes, rules/traps.py) -> URLs queued of
                         that shape (with CRAWL_MAX_URLS_PER_PATTERN); and per token
                         shape (CRAWL_TRAP_TOKEN_URLS) ``n`` .. shape -> its new
                         URLs, ``r`` .. shape -> its links to URLs seen before,
                         ``u`` / ``d`` .. shape -> its pages judged new content /
                         copies of the host's pages, ``s`` .. shape -> links of the
                         shape found on its pages (token_evidence.py).
``il:<pkey>``      SET   votes for the host: 4-byte hashes of the distinct other
                         registered domains linking to it, up to 256 (an intset
                         while small); its budget is CRAWL_HOST_BUDGET per vote.
``ob:<pkey>``      LIST  ``band \t item``: URLs over the host's budget, in order;
                         add.lua moves them into the host queue as votes arrive,
                         budget_release.lua when released (budgets.py).
``tr``             HASH  ``host \t reason`` -> URLs contained for that reason
                         (``token``, ``budget``, and park_host's reasons:
                         ``duplicates``, ``dns``, ...): what ``crawlproject parked
                         --reasons`` shows; only trap hosts have fields.
``aopic``          HASH  credit mode: ``L``, the lambda offset (every queued URL
                         has gained L - L at its enqueue from the lambda page),
                         and ``cash``, lambda credit not yet spread (claim raises
                         L by cash / queued: O(1)).
``lease``          HASH  lease id -> ``state \\t worker \\t pkey \\t band \\t item``
                         (item: the request, stored form; in credit mode
                         fingerprint, then credit and L at enqueue as 8-byte
                         doubles, then the request), so it goes back to its band; state ``f`` =
                         fetching (holds the slot), ``p`` = processing (slot
                         freed, links not yet stored).
``leases``         ZSET  lease id -> expiry (ms, Redis clock): reclaim.lua takes back
                         the expired ones (their worker died or hung).
``seq``            STRING lease id counter.
``seen``           HASH  the shard's seen set (CRAWL_SEEN_FILTER; add.lua tests and
                         adds each URL: crawlproject/frontier/store/lua/_seen.lua, seen_set.py):
                         ``n`` URLs added; exact: ``L`` (level, 11 at first) and
                         ``s`` (split pointer) of its linear hashing, 2^L + s buckets.
``seen:<n>``       SET   exact seen set, bucket n (decimal): integers, kept by Redis
                         as an intset (8 bytes each) while at most
                         set-max-intset-entries (512; a bucket holds 64-256 on
                         average). v = the fingerprint's 8 bytes little-endian, x =
                         v mod 2^48; a URL's bucket is x mod 2^L, or x mod 2^(L+1)
                         when that is below s; its member is v >> 11 in decimal
                         (the bucket number holds the other 11 bits). Exact: two URLs
                         are the same iff their 64-bit fingerprints are. Bucket s
                         splits (s and s + 2^L) once the shard holds more than 128
                         URLs per bucket.
``bloom:<i>``      STRING Bloom seen set (CRAWL_SEEN_FILTER = bloom), segment i: a
                         bit array made at full size when the crawl is created,
                         blocks of 512 bytes (its shape in meta ``seen_layout``);
                         a URL's k bits all lie in one block.
``slotguard``     none  never written: declared by every frontier script (after
                         ``ready``), so that a script on a slot in migration is
                         refused whole before it runs (the source holds a declared
                         key that is missing: TRYAGAIN or ASK; the target, asked,
                         misses it: TRYAGAIN), never stopped midway ("non local key").
``c:<call id>``    STRING a call's reply (cmsgpack), PX the caller's outage bound + 30 s:
                         the last key of every frontier script that writes, of
                         robots' get_or_lock/put_unlock and recrawl_promote
                         and of the token evidence's increments (crawlproject/lua.py
                         once_per_call, increments.py), so that the call
                         sent again (by redis-py's cluster client, or the outbox's
                         failed batch) answers its first run's reply, never runs
                         twice. Call id: 10 hex digits a process, a counter (hex),
                         ``.<i>`` the i-th call of a batch.
``reclaims``       HASH  URL (first 8 bytes of the SHA-1 of its pkey \\t request,
                         16 hex chars) ->
                         times its lease was reclaimed (its worker died or hung);
                         written only by reclaim.lua, the field dropped when the
                         URL is acked (done, moved, dead) or poisoned, so only
                         URLs reclaimed and not yet finished cost bytes.
``dead``           LIST  ``pkey \\t request``: stored requests that could not be
                         decoded (``crawlproject dead``: listed, explained,
                         requeued; frontier/crawl/dead.py).
``poison``         LIST  ``host \t band \t item``: URLs reclaimed
                         ``CRAWL_MAX_RECLAIMS`` times (each take killed or hung its
                         worker), set aside so the crawl can finish; kept for an
                         operator (``crawlproject poisoned [--requeue]``).
``parked``         LIST  ``host \t band \t item`` set aside by a trap
                         rule (e.g. a host serving a run of duplicate pages, or
                         one that does not resolve); kept for an operator.
``n``              HASH  counters: ``queued``, ``leased`` (gauges); ``enqueued``,
                         ``seen_hits``, ``claims``, ``releases``, ``done``,
                         ``reclaimed``, ``poisoned``, ``unpoisoned``, ``deferred``,
                         ``parked``, ``unparked``, ``host_capped``, ``pattern_capped``,
                         ``over_budget``, ``budget_released``, ``token_parked``,
                         ``recrawl_promoted``, ``recrawl_lost``; on an address's
                         home shard ``address_taken``, ``address_denied``,
                         ``address_woken`` (totals).
``fs:<pkey>``      HASH  recrawl (CRAWL_RECRAWL_TRACK): URL fingerprint (8 bytes) ->
                         its fetch state, a line of text (last fetch, interval,
                         fetches, changes, gone, digest, SimHash, depth, ETag,
                         Last-Modified, URL: crawlproject/recrawl/schedule.py).
``rdue``           ZSET  recrawl schedule: fingerprint .. pkey -> next due time (unix
                         s). A URL is here while it waits, and not while queued or
                         in flight: recrawl_promote.lua moves it into its host
                         queue (one atomic step, so concurrent promoters queue it
                         once), the worker that fetched it puts it back.
``wd``             HASH  body store (WARC): the payloads the fleet stored whole, so
                         that a body stored again is a ``revisit`` record
                         (crawlproject/store/revisits.py): first 8 bytes of the
                         payload's SHA-1 (the shard: its first 4 bytes modulo the
                         shards) -> its other 12 bytes, the original record's
                         WARC-Date (unix microseconds, 8 bytes big-endian) and URL.
                         One entry per distinct payload stored (BENCHMARKS.md).
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

Per address ``A`` (an IP address, canonical text), in its home shard, prefix
``cp:{T}:`` (crawlproject/frontier/store/lua/address_*.lua):

``al:<A>``         ZSET  places held at A: lease token (``shard:id`` of the URL's
                         lease) -> expiry (ms), renewed with the lease; expired
                         places are dropped by the next script at A.
``aq:<A>``         ZSET  hosts (politeness keys) waiting for a place at A -> time
                         first refused (ms): first come, first served.
``ar:<A>``         ZSET  places reserved for woken hosts: politeness key -> until (ms).
``a:<A>``          HASH  CRAWL_POLITENESS_KEY = address: ``next`` (ms, the address's
                         next start), ``pen`` (ms, its 429/503 penalty), ``ft``
                         (ms, its last answer's time, as ``h:``'s); expires an
                         hour after its last use.
``afull``          ZSET  address -> places held, while at its cap (for status).
``aqd``            ZSET  address -> hosts waiting, while any (for status).


Per crawl, prefix ``cp:{C}:``

``meta``           HASH  ``shard_tags`` (``even``: the shards' tags, above; written
                         before ``shards``: with ``shards`` and without it, a crawl
                         made before, ``C/s`` tags), ``shards``, ``seen_layout``
                         (``exact3``, or ``bloom2:capacity:error rate:segments:
                         blocks per segment:block bytes:k``; ``exact2`` or
                         ``seen_bucket_bits``: an older version's, refused),
                         ``priority_mode`` (score | credit), ``queue_layout``
                         (fixed at creation), ``created``, ``host_keys``
                         (``server``: host keys without the scheme; without it,
                         ``scheme://host`` keys, refused in host and address
                         modes: crawlproject/frontier/store/host_keys.py).
``workers``        ZSET  worker id -> last heartbeat (ms, Redis clock).
``scope``          SET   scope roots (hosts or registered domains) of all seeds.
``stats``          HASH  fleet counters: each worker adds its Scrapy stats' increments
                         (robotstxt/, dedupe/, store/, recrawl/, ... see
                         crawlproject/status/reporter.py) every few seconds, once
                         per report (status/fleet_counters.py: ``c:`` below).
``tp``             HASH  throughput: 10-second bucket start (unix s) -> responses
                         received by the fleet in it; buckets older than one hour
                         are deleted by the workers (at most 360 + 1 fields: the
                         status page's chart of the last hour).
``c:<call id>``    STRING a fleet report's reply, as the shards' ``c:`` above: a
                         report sent again adds nothing (crawlproject/increments.py).
``w:<worker>``     HASH  a worker's last gauges (responses/s, in flight, spooled files,
                         ...), expiring a few report periods after its last report.
``hr``             HASH  worker id -> its busiest and failing hosts, JSON (its top 20
                         by pages and by errors: crawlproject/status/hosts.py); a
                         field not refreshed for an hour is deleted by the workers.
``render``         HASH  where pages need rendering in a browser, learned by the fleet
                         (crawlproject/render/learning.py): ``t|<host>|<template>``
                         -> ``js:<k>`` or ``static``; ``h|<host>`` -> ``js`` or
                         ``static`` (docs/rendering.md).
``renderers``      ZSET  worker id -> last heartbeat (ms, its clock) of the workers
                         with a browser; one whose last is over 30 s old is taken
                         as gone (crawlproject/render/fleet.py).

Per crawl, the duplicate index, prefix ``cp:{C/dd}:`` (an index made before
the spread layout) or its parts' ``cp:{C/dd/<family>.<p>[~<n>]}:``: documented
in :mod:`crawlproject.frontier.store.dedupe_keys`, with their names.

And ``C:start_urls`` LIST: as in scrapy-redis, ``LPUSH web:start_urls URL``
(or a JSON object ``{"url": ..., "meta": {...}}``) adds a seed to crawl ``web``.

Values are JSON or plain strings, never pickle.
"""

from __future__ import annotations

import re
import zlib

from crawlproject.frontier.store.address_keys import AddressKeys
from crawlproject.frontier.store.dedupe_keys import DedupeKeys
from crawlproject.frontier.store.hash_slots import EVEN, shard_tags
from crawlproject.lua import CALL_KEY

CRAWL_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
BANDS = 32  # priority bands of a host queue (``q:<pkey>:<band>``, ``due:<band>``)


class CrawlKeys(AddressKeys, DedupeKeys):
    """Builds the key names of one crawl (an address's: AddressKeys; the
    duplicate index's: DedupeKeys). ``tags``:
    its shards' tag scheme (hash_slots.py), meta's ``shard_tags`` (crawl_layout.py)."""

    def __init__(
        self, crawl: str, shards: int, start_urls_key: str | None = None, tags: str = EVEN
    ) -> None:
        if not CRAWL_NAME_RE.match(crawl):
            raise ValueError(
                f"crawl name {crawl!r} must be 1-64 characters of letters, digits, _ . -"
            )
        if shards < 1:
            raise ValueError("CRAWL_FRONTIER_SHARDS must be at least 1")
        self.crawl, self.shards, self.tags = crawl, shards, tags
        self.crawl_prefix = f"cp:{{{crawl}}}:"
        self.meta = self.crawl_prefix + "meta"
        self.workers = self.crawl_prefix + "workers"
        self.scope = self.crawl_prefix + "scope"
        self.fleet_stats = self.crawl_prefix + "stats"
        self.throughput = self.crawl_prefix + "tp"
        self.host_reports = self.crawl_prefix + "hr"
        # REDIS_START_URLS_KEY may name another list (frontier/crawl/redis_settings.py).
        self.start_urls = start_urls_key or f"{crawl}:start_urls"
        self.shard_prefixes = [f"cp:{{{tag}}}:" for tag in shard_tags(crawl, shards, tags)]
        self.dedupe_prefix = f"cp:{{{crawl}/dd}}:"
        self.dedupe_config = self.dedupe_prefix + "cfg"
        self.soft404 = self.dedupe_prefix + "soft404"

    def worker_gauges(self, worker: str) -> str:
        return self.crawl_prefix + "w:" + worker

    def shard_of(self, pkey: str) -> int:
        return zlib.crc32(pkey.encode("utf-8")) % self.shards

    def ready(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "ready"

    def script_keys(self, shard: int) -> list[str]:
        """The KEYS of every frontier script on ``shard``: ``ready`` (it routes
        the call) and ``slotguard`` (never written: see above)."""
        prefix = self.shard_prefixes[shard]
        return [prefix + "ready", prefix + "slotguard"]

    def call_reply(self, shard: int, call: str) -> str:
        """The reply key of call id ``call`` on ``shard`` (``c:``, lua.py once_per_call)."""
        return self.shard_prefixes[shard] + CALL_KEY + call

    def crawl_call_reply(self, call: str) -> str:
        """The reply key of call id ``call`` on the crawl's own tag (``c:``)."""
        return self.crawl_prefix + CALL_KEY + call

    def counters(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "n"

    def queue(self, shard: int, pkey: str) -> str:
        return self.shard_prefixes[shard] + "q:" + pkey

    def robots(self, shard: int, origin: str) -> str:
        return self.shard_prefixes[shard] + "r:" + origin

    def robots_lock(self, shard: int, origin: str) -> str:
        return self.shard_prefixes[shard] + "rl:" + origin

    # The other per-shard keys above, for the Python side (the scripts build
    # theirs from the shard prefix they are given, by the same names).

    def due(self, shard: int, band: int) -> str:
        return f"{self.shard_prefixes[shard]}due:{band}"

    def leases(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "leases"

    def priority_mode(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "mode"

    def poison(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "poison"

    def parked(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "parked"

    def trap_reasons(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "tr"

    def host(self, shard: int, pkey: str) -> str:
        return self.shard_prefixes[shard] + "h:" + pkey

    def seen_state(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "seen"

    def seen_bucket(self, shard: int, bucket: int) -> str:
        """The set of exact seen-set bucket ``bucket``."""
        return self.shard_prefixes[shard] + f"seen:{bucket}"

    def bloom_segment(self, shard: int, segment: int) -> str:
        return self.shard_prefixes[shard] + f"bloom:{segment}"

    def recrawl_due(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "rdue"

    def fetch_states(self, shard: int, pkey: str) -> str:
        return self.shard_prefixes[shard] + "fs:" + pkey

    def payload_digests(self, shard: int) -> str:
        """The body store's index of stored payloads (``wd``, store/revisits.py)."""
        return self.shard_prefixes[shard] + "wd"

    def all_patterns(self) -> list[str]:
        """Glob patterns matching every key of the crawl (for ``crawlproject reset``)."""
        # ``cp:{C/*``: the shards of either tag scheme, the dedupe index and its parts.
        return [self.crawl_prefix + "*", f"cp:{{{self.crawl}/*", self.start_urls]
