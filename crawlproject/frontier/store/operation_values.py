"""The values the frontier's operations take and return
(crawlproject/frontier/store/redis_frontier.py): a lease, a URL on its way in,
a claim, a slot release, an add's outcome."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from crawlproject.frontier.store.codec import stored_form

NO_PATTERN = bytes(8)
NO_VOTE = bytes(4)
SEED_VOTE = b"\xff\xff\xff\xff"  # a seed: the operator's vote for its host
# The operator's vote for a host of the crawl's scope (add.lua marks it `scoped`).
SCOPE_VOTE = b"\xfe\xff\xff\xff"
_DOUBLE = struct.Struct(">d")
# The low bits of a fingerprint that its seen-set bucket holds: the bucket
# stores the rest, v >> SEEN_MEMBER_SHIFT (seen_set.py MIN_LEVEL, _seen.lua).
SEEN_MEMBER_SHIFT = 11
_NO_MEMBER = b"\x00"  # a credit- or vote-only entry is not seen-tested


class FrontierMismatch(RuntimeError):
    """A worker joins a crawl whose fixed layout differs from its settings."""


@dataclass(frozen=True, slots=True)
class Lease:
    shard: int
    id: int

    @property
    def token(self) -> str:
        return f"{self.shard}:{self.id}"

    @classmethod
    def parse(cls, token: str) -> Lease:
        shard, _, lease_id = token.partition(":")
        return cls(int(shard), int(lease_id))


@dataclass(frozen=True, slots=True)
class NewEntry:
    """A URL on its way into the frontier."""

    pkey: str  # politeness key
    fingerprint: bytes  # 8 bytes, see UrlCanonicalizer.fingerprint
    dont_filter: bool
    data: bytes  # encoded request; empty for a credit-only entry
    # Priority score (lower first), or in credit mode the AOPIC credit it brings.
    score: float = 0.0
    pattern: bytes = NO_PATTERN  # URL shape key (rules/traps.py), for the per-shape cap
    credit_only: bool = False  # a link seen before: only its credit goes in
    # Token shape (rules/traps.py token_shape): watched for tokens that never repeat.
    token_shape: bytes = NO_PATTERN
    # The linking page's registered domain (4 bytes of its hash) when it is
    # another than the URL's; SEED_VOTE for a seed; NO_VOTE otherwise.
    vote: bytes = NO_VOTE
    vote_only: bool = False  # a link seen before: only its vote (and token repeat) goes in

    def packed(self) -> bytes:
        """One add.lua argument: fingerprint, kind, options, the seen-set
        member (its length, one byte, then its digits), the trap fields that
        are set, the number (8-byte big-endian double), the request (its stored
        form: the URL without the politeness key, which add.lua gets once per
        host). The member is the fingerprint as the seen set stores it (v >>
        11, v its 8 bytes little-endian, in decimal): made here, as formatting
        it in Lua cost Redis ~1.5k instructions a link more (4 % of a page)."""
        if self.credit_only or self.vote_only:
            kind, member = (b"c" if self.credit_only else b"v"), _NO_MEMBER
        else:
            kind = b"1" if self.dont_filter else b"0"
            digits = b"%d" % (int.from_bytes(self.fingerprint, "little") >> SEEN_MEMBER_SHIFT)
            member = bytes((len(digits),)) + digits
        number = _DOUBLE.pack(self.score)
        data = stored_form(self.data, self.pkey)
        if self.pattern == NO_PATTERN and self.token_shape == NO_PATTERN and self.vote == NO_VOTE:
            return self.fingerprint + kind + b"@" + member + number + data  # the usual link
        opt = 0x40
        parts = [self.fingerprint, kind, b"", member]
        if self.pattern != NO_PATTERN:
            opt |= 1
            parts.append(self.pattern)
        if self.token_shape != NO_PATTERN:
            opt |= 2
            parts.append(self.token_shape)
        if self.vote != NO_VOTE:
            opt |= 4
            parts.append(self.vote)
        parts[2] = bytes((opt,))
        parts += (number, data)
        return b"".join(parts)


@dataclass(frozen=True, slots=True)
class ClaimBatch:
    shard: int
    now_ms: int  # Redis clock
    next_ready_ms: int | None  # earliest ready time left in the shard
    items: list[tuple[Lease, bytes]]  # the request (codec.py, its URL whole)
    # Credit mode (AOPIC): per item, the credit its page passes on to its links.
    shares: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Release:
    """A lease whose fetch is over (see release.lua)."""

    lease: Lease
    age_ms: int  # since the response (or failure) came back
    fetch_ms: int = -1  # server response time; -1: no contact, nothing learnt
    hold_ms: int = 0  # keep away at least this long after it (Retry-After, robots backoff)
    throttled: bool = False  # answered 429/503: the host's penalty grows
    requeue: bool = False  # the URL was not fetched: back to the head of its queue
    contacted: bool = True  # False: no request reached the host with this slot

    @property
    def flags(self) -> int:
        return (
            (1 if self.throttled else 0) | (2 if self.requeue else 0) | (0 if self.contacted else 4)
        )


@dataclass(frozen=True, slots=True)
class AdaptiveDelay:
    """How a host's delay follows its behaviour (see release_slot in _prelude.lua)."""

    factor: float = 0.0  # delay >= factor x server response time ...
    max_ms: int = 0  # ... up to this
    backoff_max_ms: int = 3_600_000  # cap of the 429/503 penalty and of holds


@dataclass(frozen=True, slots=True)
class HostBudget:
    """Trap budgets the add script applies (see add.lua; 0 turns one off)."""

    base: int = 0  # URLs a host may queue per vote (its own vote included)
    seed_votes: int = 0  # votes a seed's host gets from the operator
    token_urls: int = 0  # new URLs of one token shape before its repeats are judged
    token_repeat_permille: int = 0  # under this many repeats per 1,000: contained


@dataclass(frozen=True, slots=True)
class AddResult:
    added: int
    seen_hits: int
    host_capped: int = 0  # refused: the host reached its URL cap
    pattern_capped: int = 0  # refused: the URL's shape reached its cap on the host
    credited: int = 0  # queued URLs raised by AOPIC credit
    # Hosts that hit a cap for the first time in the crawl (reported once, fleet-wide).
    newly_capped: list[str] = field(default_factory=list)
    newly_pattern_capped: list[str] = field(default_factory=list)
    over_budget: int = 0  # kept in the host's overflow: over its budget (votes)
    token_parked: int = 0  # parked: their token shape is contained on the host
    newly_over_budget: list[str] = field(default_factory=list)
    # (host, token shape hex) contained by this call (reported once, fleet-wide).
    newly_contained: list[tuple[str, str]] = field(default_factory=list)
    released: int = 0  # over-budget URLs let in by new votes
