"""The request.meta keys the frontier reads and writes (shared with the spider
and the middlewares; a bottom-layer module so that none of them imports the
scheduler for a constant)."""

from __future__ import annotations

LEASE_META_KEY = "crawl_lease"  # the lease token of a claimed URL (leases.py)
SEED_META_KEY = "crawl_seed"  # a seed: the operator's vote for its host
SCOPE_META_KEY = "crawl_scope"  # the scope root (site) a URL was found under
