"""The key names of the fleet's duplicate index (crawlproject/dedupe/), a base
of :class:`crawlproject.frontier.store.keys.CrawlKeys`, and their documentation: the
rest of the crawl's keys are in keys.py's table. Apart so that keys.py stays
within one module's length.

Per crawl, dedupe index, prefix ``cp:{C/dd}:``: its ``cfg`` and, in an index
made before the spread layout (its ``cfg`` has no ``parts``), everything below
on this one hash tag (one script run per page, dedupe.lua). Pages are known by
their body's SHA-1 (exact) and, for HTML, a 64-bit SimHash (near: Hamming
distance <= k). A new index is spread (see "dedupe index, spread" below).

``cfg``            HASH  ``k``: the near distance, fixed at first use (the block
                         layout depends on it; a worker with another k is refused);
                         ``fv``: the SimHash features version (FEATURES_VERSION in
                         crawlproject/dedupe/fingerprint.py), fixed at first use,
                         missing in an index created before it existed (= 1); a
                         worker of another version is refused, as its SimHashes
                         and the recrawl states' (``fs:<pkey>``) would be misread;
                         the layout, fixed at first use: ``b`` (blocks: the near
                         tables are the C(b, k) choices of b - k blocks), ``load``
                         (entries per bucket), ``nmin`` (the near tables' first
                         level); the growth (linear hashing, dedupe.lua): exact
                         ``xL`` (level), ``xs`` (split pointer), ``xn`` (pages),
                         near ``nL``, ``ns``, ``nn``. No ``b``: an index from
                         before the growing layout (fixed buckets), refused in one
                         line (crawlproject/dedupe/index.py FIXED_BUCKETS).
                         ``parts``: the index is spread over that many parts per
                         family (below; its growth is in each part's ``st``).
``x:<a>``          STRING exact index: SHA-1 bytes 3-10 (8 bytes each) of the pages
                         in bucket ``a`` (hex, at least 4 digits), packed back to
                         back (a match counts on an entry boundary only). A page's
                         bucket is x mod 2^xL (or 2^(xL+1) below ``xs``), x = SHA-1
                         bytes 1-2 (b1 x 256 + b2) + 2^16 x bytes 3-6 read little-
                         endian; levels start at 16, so bucket and entry hold 80 bits.
``s:<t>:<a>``      STRING near table ``t``, bucket ``a`` (hex, at least 4 digits): the
                         SimHashes (8 bytes, big-endian), packed back to back, of
                         the pages whose table key selects it (as ``x:``, with
                         ``nL``, ``ns``). Table t's key: its blocks' bits, the least
                         significant block lowest (at most the low 48 bits). The 64
                         bits are cut into b blocks, most significant first, widths
                         as even as possible; a page within distance k of a query
                         shares b - k blocks with it (pigeonhole), so it is in the
                         query's bucket of at least one table. Only new pages are
                         added.
``o:<bb>``         HASH  originals (kept only with record_originals): page id bytes
                         3-8 (6 bytes) -> URL of the first page with that id. Page
                         id = its SimHash (8 bytes big-endian), or without one its
                         SHA-1 bytes 1-8; ``bb`` = id bytes 1-2, 4 hex digits.
``streak``         HASH  politeness key -> duplicate pages (exact or near) in a row
                         from it; a new page from the host deletes the field.
``n``              HASH  counters: ``new``, ``exact``, ``near`` (totals).
``soft404``        HASH  politeness key -> soft-404 state of a host that served a
                         suspect page (crawlproject/dedupe/soft404.py): ``?`` probe
                         queued (set with HSETNX: one worker probes for the fleet),
                         ``-`` the probe was not answered 2xx, else ``<simhash
                         hex> \t <sha1 hex> \t <probe url>``: its not-found page.
                         One hash in every layout (one command a suspect host).

Per crawl, dedupe index, spread (``parts`` P in ``cfg``; crawlproject/dedupe/spread.py):
the near tables, the exact index, the originals and the hosts cut into P parts,
each part its own hash tag ``cp:{C/dd/<family>.<p>[~<n>]}:``: family ``n<g>``
(near group g: the tables whose first block is block g, k + 1 groups), ``x``,
``o``, ``h``; ``~<n>`` chosen so that the tags sit evenly over the 16,384
slots, part after part. Each key below as in the one-tag layout, within its
part; every script is one part's (lua/spread_*.lua) and declares its keys.

``st``             HASH  a near group's or the exact index's part: ``L`` (level),
                         ``s`` (split pointer), ``n`` (pages; a group's tables hold
                         the same pages); the exact parts also ``sig`` (the layout,
                         Spread.signature: a worker of another is refused before it
                         writes).
``s:<t>:<a>``      STRING in part p of table t's group (p = the table key's top log2 P
                         bits, its first block's): bucket ``a`` at the part's level
                         (from level nmin - log2 P).
``x:<a>``          STRING in exact part p (p = SHA-1 byte 1's top log2 P bits): x =
                         bytes 1-2 below those bits, then bytes 3-6 little-endian;
                         levels from 16 - log2 P; entries SHA-1 bytes 3-10.
``o:<bb>``         HASH  originals, in part p of the id's byte 1's top bits.
``streak``, ``n``  HASH  in host part p = CRC-32(host) mod P: that part's hosts'
                         streaks, and its counters (``crawlproject status`` sums them).
"""

from __future__ import annotations


class DedupeKeys:
    """The one-tag index's keys, on ``dedupe_prefix`` (set by CrawlKeys); the
    spread index's parts build theirs (crawlproject/dedupe/spread.py)."""

    dedupe_prefix: str

    def dedupe_exact(self, bucket: int) -> str:
        """Exact-index string of bucket ``bucket``."""
        return f"{self.dedupe_prefix}x:{bucket:04x}"

    def dedupe_near(self, table: int, bucket: int) -> str:
        """Near-index string of table ``table``'s bucket ``bucket``."""
        return f"{self.dedupe_prefix}s:{table}:{bucket:04x}"
