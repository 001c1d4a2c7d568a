"""What the pages of a token shape showed, for the token guard.

The token guard (add.lua, ``CRAWL_TRAP_TOKEN_URLS``) must tell an id minted
per render (a session id, a cache buster, a per-render token: a new value on
every render of the same page) from a stable id linked once (hex, uuid or
base62 ids of distinct articles, each listed once). Links alone cannot: both
are URLs never seen before. The pages they lead to can:

* pages of minted ids copy pages of their host (the same page under a new
  id): the duplicate judgement (middlewares/dedupe.py) finds them duplicates;
  pages of stable ids are each new content;
* minted ids are carried from page to page (each page of a session links the
  next ones under a new id): the shape's URLs are found on pages of the same
  shape; stable ids come from other pages (listings, indexes).

So for each fetched page whose URL has a token shape (rules/traps.py
``token_shape``), the page's host gets, in ``pp:<host>`` (keys.py), per shape:
``u`` .. shape += 1 when the page was judged new content, ``d`` .. shape += 1
when it was a duplicate of a page of its own host, and ``s`` .. shape += the
page's links of the same host and shape. A page without a judgement (a thin
page, a mirror's copy, no item, no dedupe fields) adds only its links.
add.lua's ``token_minted`` (in _prelude.lua) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawlproject.frontier.basics.urls import InvalidURL
from crawlproject.increments import Increment, Increments
from crawlproject.lua import CALL_IDS
from crawlproject.rules.traps import token_shape

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from crawlproject.frontier.admission.admission import Admission
    from crawlproject.frontier.store.keys import CrawlKeys

NOVEL_FIELD, DUPLICATE_FIELD, SPAWNED_FIELD = b"u", b"d", b"s"


@dataclass(frozen=True, slots=True)
class TokenPage:
    """A page whose URL has a token shape: its host (politeness key) and shape."""

    pkey: str
    shape: bytes


def _host_and_shape(admission: Admission, url: str) -> TokenPage | None:
    # Most URLs have no token, as written or canonical: one scan says so, and
    # spares canonicalizing them (admission.py: the costlier step).
    if token_shape(url) is None:
        return None
    canonical = admission.canonical_or_none(url)
    if canonical is None:
        return None
    shape = token_shape(canonical)
    if shape is None:
        return None
    try:
        return TokenPage(admission.politeness_key(canonical), shape)
    except InvalidURL:
        return None


def token_page(admission: Admission, url: str) -> TokenPage | None:
    """The token page of ``url`` (None: no token shape, or the guard is off)."""
    if not admission.config.trap_token_urls:
        return None
    return _host_and_shape(admission, url)


def same_shape(admission: Admission, url: str, page: TokenPage) -> bool:
    """Whether the link ``url`` has the host and token shape of ``page``."""
    return _host_and_shape(admission, url) == page


class TokenEvidence:
    """Writes what a page of a token shape showed into its host's ``pp:<host>``,
    once (crawlproject/increments.py: a call sent again by redis-py's cluster
    client after a lost reply adds nothing)."""

    def __init__(self, redis: Redis, keys: CrawlKeys) -> None:
        self.redis = redis
        self.keys = keys
        self._increments = Increments(redis)

    def key(self, pkey: str) -> str:
        return self.keys.shard_prefixes[self.keys.shard_of(pkey)] + "pp:" + pkey

    async def record(self, pkey: str, shape: bytes, content: bool | None, spawned: int) -> None:
        """A page of host ``pkey`` and token shape ``shape`` (8 bytes): ``content``
        True new content, False a duplicate of a page of its host, None not
        judged; ``spawned`` its links of the same host and shape."""
        if len(shape) != 8:
            raise ValueError("a token shape is 8 bytes")
        fields = []
        if content is not None:
            fields.append((NOVEL_FIELD if content else DUPLICATE_FIELD) + shape)
        if not fields and not spawned:
            return
        key = self.key(pkey)
        increments: list[Increment] = [(key, field, 1) for field in fields]
        if spawned:
            increments.append((key, SPAWNED_FIELD + shape, spawned))
        call = self.keys.call_reply(self.keys.shard_of(pkey), CALL_IDS.new())
        await self._increments.add(call, increments)
