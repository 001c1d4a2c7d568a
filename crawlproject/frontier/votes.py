"""What a link tells the frontier's trap guards, beside its URL.

* **A vote**: a link from a page of another registered domain is that
  domain's vote for the target host; the frontier counts distinct voters per
  host and grows the host's page budget with them (add.lua, IRLbot's budget
  enforcement). A seed is the operator's vote.
* **A token shape** (rules/traps.py ``token_shape``): a URL with a part that
  looks minted; the frontier watches whether such URLs ever repeat.

A link the worker sent before (its local seen cache) still carries these
two: a vote-only entry, sent once per (voter, host) and worker, and for a
token shape every repeat, which is what tells minted tokens from stable ids.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from urllib.parse import urlsplit

from crawlproject.frontier.client import NO_VOTE, SEED_VOTE
from crawlproject.frontier.urls import registered_domain

# Request.meta key: the host of the page a link was found on (set by
# middlewares/link_source.py; read and dropped before the request is stored).
LINK_FROM_META_KEY = "crawl_from"
VOTE_BYTES = 4
DOMAINS_CACHED = 65_536


@lru_cache(maxsize=DOMAINS_CACHED)
def _voter(host: str) -> str:
    return registered_domain(host)


@lru_cache(maxsize=DOMAINS_CACHED)
def vote_of(domain: str) -> bytes:
    """4 bytes of a registered domain's hash, never NO_VOTE or SEED_VOTE."""
    v = hashlib.blake2b(domain.encode("utf-8", "surrogatepass"), digest_size=VOTE_BYTES).digest()
    return b"\x00\x00\x00\x01" if v in (NO_VOTE, SEED_VOTE) else v


class SentVotes:
    """The (vote, host) pairs a worker sent, at most ``remembered`` of them
    (CRAWL_SENT_VOTES_SIZE).

    A pair is kept as its 64-bit hash alone, in two generations of
    ``remembered // 2`` (as RecentFingerprints and KnownLinks in admission.py):
    when the young one is full it becomes the old one and the oldest goes; a
    pair found in the old generation moves to the young one, so the pairs a
    site repeats on every page stay. About 60 bytes a pair, against ~157 for the
    LRU of strings it replaces (bench/worker_memory.py: one new pair per
    cross-site link, ~16 MB over 100,000 pages of a 2,000-host web). Forgetting a
    pair, or two pairs sharing a hash (~n / 2**64), costs at most a vote sent
    again or one not sent from this worker: the frontier counts a host's voters
    as a set (add.lua), and every other worker still sends its own.
    """

    def __init__(self, remembered: int) -> None:
        if remembered < 2:
            raise ValueError("SentVotes remembers at least 2 pairs")
        self.generation = remembered // 2
        self._young: set[int] = set()
        self._old: set[int] = set()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def first(self, vote: bytes, pkey: str) -> bool:
        """True the first time (as far as remembered) ``vote`` goes to ``pkey``."""
        key = hash((vote, pkey))
        if key in self._young:
            return False
        if key in self._old:
            self._old.discard(key)
            self._add(key)
            return False
        self._add(key)
        return True

    def _add(self, key: int) -> None:
        if len(self._young) >= self.generation:
            self._old, self._young = self._young, set()
        self._young.add(key)


class LinkVotes:
    """Per worker: the vote a link carries, and whether it was sent before."""

    def __init__(self, remembered: int) -> None:
        self._sent = SentVotes(remembered)

    def vote(self, source_host: object, canonical_url: str) -> bytes:
        """The vote of the page at ``source_host`` for the link's host, or NO_VOTE
        (same host or registered domain, or no source)."""
        if not isinstance(source_host, str) or not source_host:
            return NO_VOTE
        return self.vote_for_host(source_host, urlsplit(canonical_url).hostname or "")

    def vote_for_host(self, source_host: object, target: str) -> bytes:
        """``vote`` for a link whose canonical URL's host is ``target``."""
        if not isinstance(source_host, str) or not source_host:
            return NO_VOTE
        if target == source_host:
            return NO_VOTE
        voter = _voter(source_host)
        if voter == _voter(target):
            return NO_VOTE
        return vote_of(voter)

    def first(self, vote: bytes, pkey: str) -> bool:
        """True the first time (as far as this worker remembers) ``vote`` goes to ``pkey``."""
        return vote != NO_VOTE and self._sent.first(vote, pkey)
