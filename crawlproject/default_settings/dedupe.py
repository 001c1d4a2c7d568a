"""Duplicate pages and soft 404s."""

# Duplicate pages, fleet-wide (middlewares/dedupe.py decides, pipelines/dedupe.py
# drops): an exact test on the body's SHA-1, then, for HTML, a near-duplicate
# test on a 64-bit SimHash of the visible text (char 4-grams) in Redis.
CRAWL_DEDUPE_ENABLED = True
# Fingerprints within this many bits are near-duplicates (Manku et al.: 3 of 64).
CRAWL_SIMHASH_K = 3
# The near index's blocks b for a new crawl (fixed when its index is created;
# later workers use the index's): C(b, k) tables, each keyed by b - k blocks.
# More blocks: wider keys, so a lookup stays flat to a larger index, for 8
# bytes per table per page. 0: k + 2 up to k = 5 (k = 3: 10 tables, flat to
# about a billion pages; 6 gives 20 tables, flat far beyond), else k + 1.
CRAWL_DEDUPE_NEAR_BLOCKS = 0
# Parts a new crawl's index is cut into per family (a power of 2 up to 128,
# fixed when the index is created; later workers use the index's), each on a
# hash tag of its own spread over the slots. More parts spread the index over
# more masters and make each part smaller (an originals part of a 15e9-page
# crawl: about 75 GB at 16, 19 GB at 64) for more Redis calls per batch
# (1.40x the Redis CPU per page at 64 than at 16: BENCHMARKS.md). 0 (one
# hash tag) was removed in issue 42: ``crawlproject dedupe migrate`` moves such an index.
CRAWL_DEDUPE_PARTS = 16
# Content types fingerprinted for near-duplicates (all bodies get the exact test).
CRAWL_DEDUPE_CONTENT_TYPES: list[str] = ["text/html", "application/xhtml+xml"]
# Pages with less visible text than this (normalised characters) only get the
# exact test: a few words make no reliable fingerprint.
CRAWL_DEDUPE_MIN_TEXT_CHARS = 200
# Links of a page found to be a duplicate, followed after the originals' own
# links or not at all. A near copy's are followed (listing pages under one long
# template are near copies, each linking pages no other does), and so are a
# copy's whose original is on another host (a mirror's copy links to the
# mirror's pages, some of which may exist there only); "other_host" drops those
# of an exact copy of a page of its own host (the same bytes: the same links);
# "all" follows every duplicate's; "none" none (True/False: "all"/"none").
CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS = "other_host"
# The items a spider yields for a page that is an exact copy (the same body) of
# a page the crawl already has are dropped (dedupe/items_dropped); False keeps
# them. A near copy's items are always kept; no item ever gains a field. (The
# web spider's own fetch record of a copy is dropped either way: not stored.)
CRAWL_DEDUPE_DROP_ITEMS = True
# Soft-404 detection: the first time a host serves a suspect page (a near copy of
# another of its pages, or one whose text shows its own path), one worker fetches
# a path that cannot exist there; if that answers 2xx, the host's pages within
# CRAWL_SIMHASH_K of it are soft 404s: not kept, links not followed (trap/soft404).
CRAWL_SOFT404_PROBE = True
# Remember which URL each fingerprint came from, so a duplicate names its
# original (costs Redis memory per page: see BENCHMARKS.md).
CRAWL_DEDUPE_RECORD_ORIGINALS = True
# A host whose last CRAWL_DEDUPE_STREAK pages in a row were duplicates (a
# soft-404 or session-id trap) gets its queued URLs set aside ("park": moved to
# the frontier's parked list, kept for an operator; "off": only logged). 0: never.
CRAWL_DEDUPE_STREAK = 20
CRAWL_DEDUPE_STREAK_ACTION = "park"
