"""Soft-404 spaces: a host that answers any URL 200 with its "not found" page.

Such a host turns every link into a page, often one that echoes its own path
and links deeper by relative links, so the crawl never runs out of URLs. It is
told from what the crawl sees: the first time the fleet meets a *suspect* page
of a host (one judged a near duplicate of another page of the same host, or one
whose visible text shows its own path; not an exact copy, which URL aliases such
as ``?a=1&b=2`` for ``?b=2&a=1`` are, and whose links are not followed anyway),
one worker (the one whose ``HSETNX``
wins, so one per fleet) queues a **probe**: a path that cannot exist,
``/<16 hex>-<16 hex>.html``. Its answer is the host's verdict, kept in Redis
(``soft404`` in frontier/store/dedupe_keys.py: politeness key -> state):

* ``?``  probe queued, no answer yet (it goes through the frontier: politeness
  and robots.txt apply; robots.txt may forbid it, then the host stays ``?``);
* ``-``  not 2xx (a real 404, a redirect): no soft-404 space;
* ``<simhash hex>\\t<sha1 hex>\\t<probe url>``  2xx: the host's not-found page.

A page of a host with a not-found page is a soft 404 when its body is that page
byte for byte, or its SimHash is within ``k`` of it, however short its text (a
"Page /a/b not found" line is a soft 404 as much as a long template). Both
SimHashes are taken of the text without its own URL and path (``strip_echo``):
the echo is all that tells two answers of the template apart, and a long path
echoed in a short template would move a SimHash by more than ``k`` bits.

Pure logic and the Redis calls; the Scrapy glue is middlewares/dedupe.py.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from redis.asyncio import Redis

from crawlproject.hamming import hamming

PENDING = "?"
NO_SOFT404 = "-"
PROBE_META_KEY = "crawl_soft404_probe"  # Request.meta: this request is a probe
# How long a worker trusts its copy of a host's state while it is not final:
# "?" (a probe is out: its verdict comes within seconds) and absent (no worker
# ever suspected the host, most hosts: read once per host and minute rather
# than every few pages, since a suspect page of the host reads it at once
# anyway and, until then, a near copy is still caught by the index).
REFRESH_SECONDS = 5.0
UNSUSPECTED_REFRESH_SECONDS = 60.0
CACHED_HOSTS = 100_000  # per worker, least recently used dropped first
MIN_ECHO_CHARS = 3  # shorter paths ("/", "/a") are not looked for in the text


def probe_path() -> str:
    """A path no site has: ``/<16 hex>-<16 hex>.html`` (128 random bits)."""
    return f"/{secrets.token_hex(8)}-{secrets.token_hex(8)}.html"


def probe_url(page_url: str) -> str:
    """The probe URL of ``page_url``'s origin."""
    parts = urlsplit(page_url)
    return f"{parts.scheme}://{parts.netloc}{probe_path()}"


def echoes_path(url: str, text: str) -> bool:
    """Whether the page's visible text shows its own path (as soft-404 pages
    saying "/a/b/ was not found" do; a real page seldom prints its URL)."""
    path = unquote(urlsplit(url).path)
    for candidate in (path, path.rstrip("/")):
        if len(candidate) >= MIN_ECHO_CHARS and candidate in text:
            return True
    return False


def strip_echo(text: str, url: str) -> str:
    """``text`` without the page's own URL and path (as a soft-404 page echoes them)."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    for echo in (url, unquote(url), f"{parts.netloc}{path}", path, path.rstrip("/")):
        if len(echo) >= MIN_ECHO_CHARS:
            text = text.replace(echo, " ")
    return text


@dataclass(frozen=True, slots=True)
class NotFoundPage:
    """What a host answered its probe with (2xx)."""

    simhash: int | None  # of its text without the echo (strip_echo); None: not HTML
    sha1: str  # hex digest of the body
    url: str  # the probe's URL

    def encode(self) -> str:
        simhash = "" if self.simhash is None else f"{self.simhash:016x}"
        return f"{simhash}\t{self.sha1}\t{self.url}"

    @classmethod
    def decode(cls, value: str) -> NotFoundPage | None:
        parts = value.split("\t", 2)
        if len(parts) != 3:
            return None
        simhash, sha1, url = parts
        try:
            return cls(int(simhash, 16) if simhash else None, sha1, url)
        except ValueError:
            return None

    def distance(self, sha1: str, simhash: int | None) -> int | None:
        """0 for the same body, the Hamming distance of the SimHashes (the page's
        taken as this one's, of its text without its echo), or None when there
        is nothing to compare."""
        if sha1 == self.sha1:
            return 0
        if simhash is None or self.simhash is None:
            return None
        return hamming(simhash, self.simhash)


def host_state(value: str | None) -> NotFoundPage | str | None:
    """A stored state: None (never suspect), PENDING, NO_SOFT404 or the page."""
    if value is None or value in (PENDING, NO_SOFT404):
        return value
    return NotFoundPage.decode(value) or NO_SOFT404


class Soft404Registry:
    """The fleet's soft-404 states (one Redis hash), with a per-worker cache."""

    def __init__(
        self,
        redis: Redis,
        key: str,
        refresh_seconds: float = REFRESH_SECONDS,
        unsuspected_refresh_seconds: float = UNSUSPECTED_REFRESH_SECONDS,
    ) -> None:
        self.redis = redis
        self.key = key
        self.refresh_seconds = refresh_seconds
        self.unsuspected_refresh_seconds = unsuspected_refresh_seconds
        # host -> (state, monotonic time read); final states are never re-read
        self._cache: OrderedDict[str, tuple[NotFoundPage | str | None, float]] = OrderedDict()
        self._claimed: set[str] = set()  # hosts this worker tried to claim

    async def state(self, host: str, fresh: bool = False) -> NotFoundPage | str | None:
        """The host's state; a state that is not final yet is read again when
        older than ``refresh_seconds`` (``unsuspected_refresh_seconds`` while
        no worker ever suspected the host), or at once with ``fresh`` (a
        suspect page: the trap grows while a worker trusts an old "never
        suspect")."""
        now = time.monotonic()
        cached = self._cache.get(host)
        if cached is not None:
            state, read_at = cached
            self._cache.move_to_end(host)
            if state == NO_SOFT404 or isinstance(state, NotFoundPage):
                return state
            trust = self.refresh_seconds if state == PENDING else self.unsuspected_refresh_seconds
            if not fresh and now - read_at < trust:
                return state
        raw = await self.redis.hget(self.key, host)
        state = host_state(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
        self._remember(host, state, now)
        return state

    async def claim(self, host: str) -> bool:
        """True for the one worker of the fleet that is to probe ``host``."""
        if host in self._claimed:
            return False
        if len(self._claimed) >= CACHED_HOSTS:
            self._claimed.clear()  # HSETNX still answers for the fleet
        self._claimed.add(host)
        won = bool(await self.redis.hsetnx(self.key, host, PENDING))
        if won:
            self._remember(host, PENDING, time.monotonic())
        return won

    async def answer(self, host: str, page: NotFoundPage | None) -> None:
        """The probe's outcome: ``page`` when it answered 2xx, else None."""
        value = page.encode() if page is not None else NO_SOFT404
        await self.redis.hset(self.key, host, value)
        self._remember(host, page if page is not None else NO_SOFT404, time.monotonic())

    def _remember(self, host: str, state: NotFoundPage | str | None, now: float) -> None:
        self._cache[host] = (state, now)
        self._cache.move_to_end(host)
        while len(self._cache) > CACHED_HOSTS:
            self._cache.popitem(last=False)


async def soft404_hosts(redis: Redis, key: str) -> dict[str, str]:
    """Host -> its probe's URL, for every host found to be a soft-404 space
    (for ``crawlproject status`` and ``parked``)."""
    found: dict[str, str] = {}
    async for field, value in redis.hscan_iter(key):
        host = field.decode() if isinstance(field, bytes) else str(field)
        state = host_state(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
        if isinstance(state, NotFoundPage):
            found[host] = state.url
    return found
