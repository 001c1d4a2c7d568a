"""The request.meta keys the frontier reads and writes (shared with the spider
and the middlewares; a bottom-layer module so that none of them imports the
scheduler for a constant)."""

from __future__ import annotations

LEASE_META_KEY = "crawl_lease"  # the lease token of a claimed URL (leases.py)
SEED_META_KEY = "crawl_seed"  # a seed: the operator's vote for its host
SCOPE_META_KEY = "crawl_scope"  # the scope root (site) a URL was found under
# AOPIC credit (admission/priority.py): the credit a request brings (set on
# links by the AOPIC middleware); the credit the claimed page may pass on (set
# at claim time).
CREDIT_META_KEY = "crawl_credit"
SHARE_META_KEY = "crawl_credit_share"
# A link's weight in its page's share (1 when absent): the AOPIC middleware
# gives it weight x share / links; what is held back goes to the lambda cash.
# Set below 1 on the links of a mirror's copy (middlewares/dedupe.py).
CREDIT_WEIGHT_META_KEY = "crawl_credit_weight"
