"""What a link tells the frontier's trap guards, beside its URL.

* **A vote**: a link from a page of another registered domain is that
  domain's vote for the target host; the frontier counts distinct voters per
  host and grows the host's page budget with them (add.lua, IRLbot's budget
  enforcement). A seed is the operator's vote, and so is a host of the
  crawl's scope (``SCOPE_VOTE``, operator_scope.py): the operator's hosts have
  no budget.
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

from crawlproject.frontier.basics.urls import registered_domain
from crawlproject.frontier.store.operation_values import NO_VOTE, SCOPE_VOTE, SEED_VOTE
from crawlproject.once import Generations

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
    """4 bytes of a registered domain's hash, never NO_VOTE, SEED_VOTE or SCOPE_VOTE."""
    v = hashlib.blake2b(domain.encode("utf-8", "surrogatepass"), digest_size=VOTE_BYTES).digest()
    return b"\x00\x00\x00\x01" if v in (NO_VOTE, SEED_VOTE, SCOPE_VOTE) else v


class SentVotes:
    """The (vote, host) pairs a worker sent, at most ``remembered`` of them
    (CRAWL_SENT_VOTES_SIZE).

    A pair is kept as its 64-bit hash alone, in two generations of
    ``remembered // 2`` (crawlproject.once.Generations, as the worker's other
    caches): a pair found in the old generation moves to the young one, so the
    pairs a site repeats on every page stay. About 77 bytes a pair, against ~166
    for the LRU of strings it replaces (bench/worker_memory.py: one new pair per
    cross-site link). Forgetting a
    pair, or two pairs sharing a hash (~n / 2**64), costs at most a vote sent
    again or one not sent from this worker: the frontier counts a host's voters
    as a set (add.lua), and every other worker still sends its own.
    """

    def __init__(self, remembered: int) -> None:
        if remembered < 2:
            raise ValueError("SentVotes remembers at least 2 pairs")
        self._pairs: Generations[int] = Generations(remembered // 2)

    def __len__(self) -> int:
        return len(self._pairs)

    def first(self, vote: bytes, pkey: str) -> bool:
        """True the first time (as far as remembered) ``vote`` goes to ``pkey``."""
        return self._pairs.first(hash((vote, pkey)))


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
