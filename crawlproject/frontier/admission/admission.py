"""URL admission: whether a request the engine hands over goes to the frontier,
and as what.

a seed's check (seed_check.py) -> canonicalize -> URL rules -> depth ->
recently seen here -> trap signals (votes, token shape) -> encoding.
:meth:`Admission.admit` returns the
:class:`~crawlproject.frontier.store.redis_frontier.NewEntry` to store, a
:class:`SeenLocally` (sent before: only its credit and votes go out), or a
:class:`Refusal` with the stat it counts under.

Most links repeat (a site's navigation is on every page), so a plain link (a
GET without body, not a seed, a redirect or a retry) is also remembered by
the string it came as (:class:`KnownLinks`): the next time the same string
comes, it is judged from what was remembered, without canonicalizing,
fingerprinting or encoding it again (:meth:`Admission.known_link`, which the
spider middleware middlewares/known_links.py calls before the link becomes
work for the other middlewares and the engine). A link that differs in any
character is another key: it is canonicalized and tested by fingerprint.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import NamedTuple, Protocol
from urllib.parse import urlsplit

from scrapy import Request, Spider

from crawlproject.frontier.admission.depth_chains import beyond
from crawlproject.frontier.admission.link_votes import LINK_FROM_META_KEY, LinkVotes
from crawlproject.frontier.admission.priority import PriorityPolicy
from crawlproject.frontier.admission.seed_check import SEEDS_REFUSED, SeedCheck
from crawlproject.frontier.admission.seeds import START_META_KEY, mark_seed
from crawlproject.frontier.basics.request_meta import CREDIT_META_KEY, SEED_META_KEY, SHARE_META_KEY
from crawlproject.frontier.basics.urls import InvalidURL, UrlCanonicalizer, domain_key, host_key
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.codec import RequestCodec, RequestEncodeError
from crawlproject.frontier.store.redis_frontier import NO_PATTERN, NO_VOTE, SEED_VOTE, NewEntry
from crawlproject.once import Generations, OncePerKey
from crawlproject.rules.traps import token_shape, url_pattern
from crawlproject.rules.url_rules import UrlRules

logger = logging.getLogger(__name__)


class ParentLease(Protocol):
    """The lease a request takes over: the claimed URL it retries or
    redirects (claims/leases.py's HeldLease, which admission need not import)."""

    @property
    def url(self) -> str: ...

    @property
    def dont_filter(self) -> bool: ...


TRAP_LOG_HOSTS = 100_000  # hosts remembered per guard for "logged once per host"
UNSTORABLE_KINDS = 64  # kinds of unstorable request warned about once each
ORIGINS_CACHED = 10_000  # origins whose politeness key is remembered


@dataclass(frozen=True, slots=True)
class Refusal:
    """Not queued; counted under the Scrapy stat ``stat``."""

    stat: str


@dataclass(frozen=True, slots=True)
class SeenLocally:
    """Sent to the frontier already (added, or found seen there): AOPIC still
    owes the URL its credit; ``votes`` carries a new voter for the host or a
    repeated token (a vote-only entry), if any."""

    pkey: str
    fingerprint: bytes
    credit: float
    votes: NewEntry | None


class KnownLink(NamedTuple):
    """What admission found for a link string it took: enough to judge the
    same string again without canonicalizing it."""

    pkey: str
    host: str  # the canonical URL's host: whom a link from another site votes for
    fingerprint: bytes
    shape: bytes | None  # its token shape (rules/traps.py), if the guard is on and it has one


class Admission:
    def __init__(
        self,
        config: FrontierConfig,
        rules: UrlRules,
        policy: PriorityPolicy,
        canonicalizer: UrlCanonicalizer,
        codec: RequestCodec,
        seed_check: SeedCheck | None = None,
    ) -> None:
        self.config = config
        self.seed_check = seed_check
        self.rules = rules
        self.policy = policy
        self.canonicalizer = canonicalizer
        self.codec = codec
        self.pkey = host_key if config.politeness_key == "host" else domain_key
        self._trap_logged = OncePerKey(TRAP_LOG_HOSTS)
        self._unstorable_logged = OncePerKey(UNSTORABLE_KINDS)
        # The fingerprints this worker sent to the frontier (at most 2 x the size).
        self._recent: Generations[bytes] = Generations(config.local_seen_size)
        self._known = KnownLinks(config.known_links_size)
        self._pkeys: dict[str, str] = {}  # origin as written -> politeness key
        self._votes = LinkVotes(config.sent_votes_size)

    def canonical_or_none(self, url: str) -> str | None:
        try:
            return self.canonicalizer.canonicalize(url)
        except InvalidURL:
            return None

    def politeness_key(self, url: str) -> str:
        """The frontier's politeness key (host or registered domain) of ``url``.

        It depends on the URL's scheme and host alone, so it is remembered per
        origin as written (the duplicate filter asks for every page, and
        canonicalizing a whole URL costs ~30 us); InvalidURL is not remembered."""
        origin = _origin_part(url)
        key = self._pkeys.get(origin)
        if key is None:
            key = self.pkey(self.canonicalizer.canonicalize(url))
            if len(self._pkeys) >= ORIGINS_CACHED:
                self._pkeys.clear()  # bounded; refilled by the hosts crawled now
            self._pkeys[origin] = key
        return key

    def locate(self, url: str, method: str = "GET", body: bytes = b"") -> tuple[str, bytes] | None:
        """(politeness key, fingerprint) of ``url``; None if it is not a valid URL."""
        canonical = self.canonical_or_none(url)
        if canonical is None:
            return None
        return self.pkey(canonical), self.canonicalizer.fingerprint(canonical, method, body)

    def known_link(self, request: Request, depth: int, source: object) -> SeenLocally | None:
        """What :meth:`admit` would make of ``request`` at ``depth``, found on a
        page of host ``source`` (None: votes are off), if it is a plain link
        this worker took before under the same string: a :class:`SeenLocally`
        (nothing to store; its vote or token shape may still go out). None when
        it must go through :meth:`admit`: not a plain link, a string not
        remembered, or a depth the trap guard refuses."""
        known = self._known_of(request, depth)
        if known is None:
            return None
        return self._seen_again(known, request.meta.get(LINK_FROM_META_KEY, source), 0.0)

    def _known_of(self, request: Request, depth: int) -> KnownLink | None:
        if not _plain_link(request):
            return None
        known = self._known.get(request.url)
        if known is None or beyond(request.meta, self.config.max_depth):
            return None  # beyond the depth guard (depth_chains.py): admit refuses it, with its stat
        return known

    def _seen_again(self, known: KnownLink, source: object, value: float) -> SeenLocally:
        """A link sent before: its credit, and a vote-only entry if it carries a
        vote not yet sent for its host or a token shape (every repeat counts)."""
        vote = self._votes.vote_for_host(source, known.host)
        first_vote = self._votes.first(vote, known.pkey)
        votes = None
        if first_vote or known.shape:
            votes = NewEntry(
                known.pkey,
                known.fingerprint,
                False,
                b"",
                token_shape=known.shape or NO_PATTERN,
                vote=vote if first_vote else NO_VOTE,
                vote_only=True,
            )
        return SeenLocally(known.pkey, known.fingerprint, value, votes)

    def admit(
        self, request: Request, spider: Spider | None, parent: ParentLease | None
    ) -> NewEntry | SeenLocally | Refusal:
        """What ``request`` becomes; ``parent``: the lease it takes over (a
        redirect or retry of a claimed URL), if any."""
        meta = request.meta
        if parent is None and meta.get(START_META_KEY) and SEED_META_KEY not in meta:
            mark_seed(request)  # a start request: the operator's vote, whatever the spider
        if parent is None and self.seed_check is not None and meta.get(SEED_META_KEY):
            # Before the seen set: a seed refused now (the guard's, say) is
            # not marked seen, and is fetched once a setting allows it.
            why = self.seed_check.problem(request.url)
            if why is not None:
                self.seed_check.warn(request.url, why)
                return Refusal(SEEDS_REFUSED)
        link = parent is None and _plain_link(request)
        if link:
            depth = request.meta.get("depth", 0)
            known = self._known_of(request, depth if isinstance(depth, int) else 0)
            if known is not None:
                value = self.policy.value(request)
                return self._seen_again(known, request.meta.get(LINK_FROM_META_KEY), value)
        try:
            canonical = self.canonicalizer.canonicalize(request.url)
        except InvalidURL as exc:
            logger.debug("Skipped: %s", exc)
            return Refusal("frontier/invalid_url")
        refused = self.rules.check(canonical)
        if refused is not None:  # before the seen test: a refused URL costs no lookup
            logger.debug("Not queued (rule %s): %s", refused, request.url)
            if refused == "url_too_long":  # one hostile page may hold thousands: once per host
                host = urlsplit(canonical).netloc
                if self._trap_logged.first(f"{refused} {host}"):
                    logger.info(
                        "URL rule %s: not queueing some URLs of %s (e.g. %.200s...)",
                        refused,
                        host,
                        canonical,
                    )
            return Refusal(f"rules/{refused}")
        if beyond(request.meta, self.config.max_depth):  # hops bringing nothing new
            self._log_trap("max_depth", canonical)
            return Refusal("trap/max_depth")
        pkey = self.pkey(canonical)
        value = self.policy.value(request)
        for key in (CREDIT_META_KEY, SHARE_META_KEY):  # in the entry's number, not stored
            request.meta.pop(key, None)
        # The trap guards' signals (link_votes.py), not stored either.
        if request.meta.get(SEED_META_KEY):
            vote = SEED_VOTE
        else:
            vote = self._votes.vote(request.meta.pop(LINK_FROM_META_KEY, None), canonical)
        shape = token_shape(canonical) if self.config.trap_token_urls else None
        fingerprint = self.canonicalizer.fingerprint(canonical, request.method, request.body)
        if parent is None and not request.dont_filter and fingerprint in self._recent:
            # Most links repeat: this spares their encoding and a Redis lookup.
            first_vote = self._votes.first(vote, pkey)
            votes = None
            if first_vote or shape:
                votes = NewEntry(
                    pkey,
                    fingerprint,
                    False,
                    b"",
                    token_shape=shape or NO_PATTERN,
                    vote=vote if first_vote else NO_VOTE,
                    vote_only=True,
                )
            if link:
                self._remember(request.url, pkey, canonical, fingerprint, shape)
            return SeenLocally(pkey, fingerprint, value, votes)
        bypass_seen = request.dont_filter
        if parent is None and bypass_seen and _fleet_start(request):
            # Every worker runs the spider's start(), and Scrapy marks start
            # requests dont_filter: honoured, each start URL would be fetched
            # once per worker (and again on each resume). A start URL is
            # seen-tested like the crawl's other seeds: once per crawl.
            bypass_seen = False
        elif parent is not None:
            if canonical == self.canonical_or_none(parent.url):
                # A retry: the URL is in the seen set already. Scrapy marks
                # retries dont_filter; the stored request keeps the original
                # flag, so a redirect after the retry is still seen-tested.
                bypass_seen, request.dont_filter = True, parent.dont_filter
            else:
                bypass_seen = parent.dont_filter
        try:
            data = self.codec.encode(request, spider)
        except RequestEncodeError as exc:
            # Refused before it is marked seen: a storable request of the URL still goes in.
            if self._unstorable_logged.first(exc.reason):
                logger.warning(
                    "Not queued: a request the frontier cannot store (%s; warned once per "
                    "kind, each counted as frontier/unstorable/%s): %s",
                    exc.reason,
                    exc.reason,
                    exc,
                )
            return Refusal(f"frontier/unstorable/{exc.reason}")
        self._recent.add(fingerprint)
        # The query shape key is only read by the per-shape cap.
        pattern = url_pattern(canonical) if self.config.max_urls_per_pattern else None
        if link:
            self._remember(request.url, pkey, canonical, fingerprint, shape)
        return NewEntry(
            pkey=pkey,
            fingerprint=fingerprint,
            dont_filter=bypass_seen,
            data=data,
            score=value,
            pattern=pattern or NO_PATTERN,
            token_shape=shape or NO_PATTERN,
            vote=vote if self._votes.first(vote, pkey) else NO_VOTE,
        )

    def _remember(
        self, url: str, pkey: str, canonical: str, fingerprint: bytes, shape: bytes | None
    ) -> None:
        host = urlsplit(canonical).hostname or ""
        # One string per host for all its links (they are many), not one per link.
        self._known.add(url, KnownLink(sys.intern(pkey), sys.intern(host), fingerprint, shape))

    def _log_trap(self, guard: str, url: str) -> None:
        host = urlsplit(url).netloc
        if self._trap_logged.first(f"{guard} {host}"):
            logger.info("Trap guard %s: not queueing some URLs of %s (e.g. %s)", guard, host, url)


def _origin_part(url: str) -> str:
    """``url`` up to its path, query or fragment: its scheme and netloc as
    written, all that its politeness key depends on."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    end = len(rest)
    for stop in "/?#":
        i = rest.find(stop, 0, end)
        if i >= 0:
            end = i
    return f"{head.lower()}://{rest[:end]}"


def _fleet_start(request: Request) -> bool:
    """A start request (Scrapy's ``is_start_request``) that any worker could
    have sent: a GET without body. A POST or a request with a body (a login
    form) stays per worker: each worker may need its own."""
    return bool(request.meta.get(START_META_KEY)) and request.method == "GET" and not request.body


def _plain_link(request: Request) -> bool:
    """A link as a page yields it: a GET without body, neither a seed (its vote
    is the operator's) nor a request that bypasses the seen test."""
    return (
        not request.dont_filter
        and request.method == "GET"
        and not request.body
        and not request.meta.get(SEED_META_KEY)
    )


class KnownLinks:
    """Link strings this worker took, exactly as they came (before
    canonicalization), each with what admission found for it (:class:`KnownLink`).

    Two generations of at most ``size`` strings each, like
    :class:`~crawlproject.once.Generations` but holding a value per string; a
    string found in the old generation moves to the young one, so the links a
    site repeats on every page stay while it is crawled. Memory: up to 2 x
    ``size`` entries (a URL string and a small tuple each).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._young: dict[str, KnownLink] = {}
        self._old: dict[str, KnownLink] = {}

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def get(self, url: str) -> KnownLink | None:
        known = self._young.get(url)
        if known is None:
            known = self._old.pop(url, None)
            if known is not None:
                self.add(url, known)
        return known

    def add(self, url: str, known: KnownLink) -> None:
        if self.size <= 0:
            return
        if len(self._young) >= self.size:
            self._old, self._young = self._young, {}
        self._young[url] = known
