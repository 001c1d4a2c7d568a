"""The key names of the fleet's duplicate index (crawlproject/dedupe/), a base
of :class:`crawlproject.frontier.store.keys.CrawlKeys`, and their documentation: the
rest of the crawl's keys are in keys.py's table. Apart so that keys.py stays
within one module's length.

Per crawl, dedupe index, prefix ``cp:{C/dd}:``: its ``cfg`` and the hosts'
``soft404`` states; the index itself is spread over parts (see "dedupe index,
spread" below), the one layout since issue 42. An index made before on this
one hash tag (a ``cfg`` without ``parts``: its keys ``x:<a>``, ``s:<t>:<a>``,
``o:<bb>``, ``streak``, ``n`` here, as crawlproject/dedupe/one_tag_read.py
reads them) is refused by workers until ``crawlproject dedupe migrate --crawl
C`` moves it. Pages are known by their body's SHA-1 (exact) and, for HTML, a
64-bit SimHash (near: Hamming distance <= k).

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
                         level), ``parts`` (the parts per family, below; each
                         part's growth is in its ``st``). No ``b``: an index from
                         before the growing layout (fixed buckets), refused in one
                         line (crawlproject/dedupe/index.py FIXED_BUCKETS); no
                         ``parts``: a one-tag index, refused in one line naming
                         ``crawlproject dedupe migrate`` (index.py ONE_TAG).
``soft404``        HASH  politeness key -> soft-404 state of a host that served a
                         suspect page (crawlproject/dedupe/soft404.py): ``?`` probe
                         queued (set with HSETNX: one worker probes for the fleet),
                         ``-`` the probe was not answered 2xx, else ``<simhash
                         hex> \t <sha1 hex> \t <probe url>``: its not-found page.
                         One hash for the whole index (one command a suspect host).

Per crawl, dedupe index, spread (``parts`` P in ``cfg``; crawlproject/dedupe/spread.py):
the near tables, the exact index, the originals and the hosts cut into P parts,
each part its own hash tag ``cp:{C/dd/<family>.<p>[~<n>]}:``: family ``n<g>``
(near group g: the tables whose first block is block g, k + 1 groups), ``x``,
``o``, ``h``; ``~<n>`` chosen so that the tags sit evenly over the 16,384
slots, part after part. Every script is one part's (lua/spread_*.lua) and
declares its keys. Linear hashing (Litwin 1980): a part's bucket a at level L
and split pointer s holds the entries whose key x has x mod 2^L = a, or x mod
2^(L+1) = a where that is below s; past ``load`` x its buckets entries, bucket
s splits by bit L.

``st``             HASH  a near group's or the exact index's part: ``L`` (level),
                         ``s`` (split pointer), ``n`` (pages; a group's tables hold
                         the same pages); the exact parts also ``sig`` (the layout,
                         Spread.signature: a worker of another is refused before it
                         writes).
``s:<t>:<a>``      STRING in part p of table t's group (p = the table key's top log2 P
                         bits, its first block's): bucket ``a`` (hex, at least 4
                         digits) at the part's level (from level nmin - log2 P):
                         the SimHashes (8 bytes, big-endian) of the pages whose
                         table key selects it, packed back to back. Table t's key:
                         its blocks' bits, the least significant block lowest. The
                         64 bits are cut into b blocks, most significant first,
                         widths as even as possible; a page within distance k of a
                         query shares b - k blocks with it (pigeonhole), so it is in
                         the query's bucket of at least one table. Only new pages
                         are added.
``x:<a>``          STRING in exact part p (p = SHA-1 byte 1's top log2 P bits): x =
                         bytes 1-2 below those bits, then bytes 3-6 little-endian;
                         levels from 16 - log2 P; entries SHA-1 bytes 3-10 (8 bytes
                         each), packed back to back (a match counts on an entry
                         boundary only): part, bucket and entry hold 80 bits.
``o:<bb>``         HASH  originals (kept only with record_originals), in part p of the
                         id's byte 1's top bits: page id bytes 3-8 (6 bytes) -> URL
                         of the first page with that id. Page id = its SimHash (8
                         bytes big-endian), or without one its SHA-1 bytes 1-8;
                         ``bb`` = id bytes 1-2, 4 hex digits.
``streak``, ``n``  HASH  in host part p = CRC-32(host) mod P: that part's hosts'
                         duplicate pages (exact or near) in a row (a new page from
                         the host deletes the field), and its counters ``new``,
                         ``exact``, ``near`` (``crawlproject status`` sums them).
"""

from __future__ import annotations


class DedupeKeys:
    """The duplicate index's keys on ``dedupe_prefix`` (``cfg``, ``soft404``:
    set by CrawlKeys); the spread index's parts build theirs
    (crawlproject/dedupe/spread.py)."""

    dedupe_prefix: str
