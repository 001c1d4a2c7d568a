"""The fleet's index of stored payloads, so that a body stored once is
referred to, not stored again: WARC ``revisit`` records.

A page whose body the fleet has stored already (the same URL unchanged, a
page without validators included, or another URL serving byte-identical
bytes) is written as a ``revisit`` record of profile
:data:`IDENTICAL_PAYLOAD_DIGEST` naming the stored original
(``WARC-Refers-To-Target-URI``, ``WARC-Refers-To-Date``); a recrawl's
``304 Not Modified`` as one of profile :data:`SERVER_NOT_MODIFIED`, naming the
original of the body the URL had at its last 2xx (its recrawl state keeps the
first 8 bytes of that body's SHA-1: the index is keyed by them, so a 304 finds
its original with no other state).

The index in Redis (one HASH per frontier shard, ``wd`` in
crawlproject/frontier/store/keys.py; the shard is the digest's first 4 bytes modulo
the shards, so the index spreads over a cluster's slots as the frontier does):

* field: the first 8 bytes of the payload's SHA-1;
* value: the other 12 bytes, the original record's WARC-Date as unix
  microseconds (8 bytes, big-endian) and its URL (UTF-8).

:meth:`RevisitIndex.claim` is one script run (one key): the stored value if
there is one, else ours is written and nothing returned, so two workers
storing the same payload at once write one original and one revisit. A
worker's claims made within ``CLAIM_WINDOW_SECONDS`` of each other go in one
round trip (crawlproject/round_trips.py), run in the order they were made:
two pages of one payload in one round trip are one original and one revisit
of it, as one after the other. A claim whose reply was lost is sent again
(it answers ours: the page is the original). A value
whose other 12 bytes differ is another payload with the same first 8 bytes
(about one pair in 2^64 / n): that page is stored whole and not indexed.
Bytes per stored payload: BENCHMARKS.md (bench/revisit_index.py). An original
whose write failed is taken out again (:meth:`RevisitIndex.release`), so no
revisit refers to a record that was never written.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from crawlproject.body_digest import payload_digest_of
from crawlproject.redis_calls import register_script
from crawlproject.round_trips import WINDOW_SECONDS, Call, Gatherer, send_calls

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from crawlproject.frontier.store.keys import CrawlKeys

logger = logging.getLogger(__name__)

SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL_PAYLOAD_DIGEST = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
# CRAWL_STORE_DUPLICATES: what a payload stored before becomes.
DUPLICATES_REVISIT = "revisit"  # a revisit record (and a 304 one)
DUPLICATES_NONE = "none"  # nothing (a 304 neither)
DUPLICATES_FULL = "full"  # stored whole again, no index (a 304: nothing, as before)
DUPLICATES_CHOICES = (DUPLICATES_REVISIT, DUPLICATES_NONE, DUPLICATES_FULL)

FIELD_BYTES = 8  # of the SHA-1: the field, and the recrawl state's digest
_REST = 20 - FIELD_BYTES
_MICROS = struct.Struct(">q")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
WHAT = "Index of stored payloads"  # in a warning of claims sent again

# A worker's claims within this window share a round trip (the duplicate
# index's window: a page waits for both at about the same moment).
CLAIM_WINDOW_SECONDS = WINDOW_SECONDS

# Lookup and insert in one step (KEYS[1] the shard's index; ARGV field, value).
_CLAIM = """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then return v end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return false
"""
# Take an original out again, only if it is still ours.
_RELEASE = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""


@dataclass(frozen=True, slots=True)
class Original:
    """The stored record a revisit refers to."""

    url: str
    date: datetime  # its WARC-Date
    digest: str  # its WARC-Payload-Digest, sha1:<BASE32>


def encode_value(sha1: bytes, url: str, date: datetime) -> bytes:
    if date.tzinfo is None:
        date = date.replace(tzinfo=UTC)
    micros = (date - _EPOCH) // _MICROSECOND  # exact, as the WARC-Date is written
    return sha1[FIELD_BYTES:] + _MICROS.pack(micros) + url.encode("utf-8")


def decode_value(field: bytes, value: bytes) -> Original:
    micros = _MICROS.unpack_from(value, _REST)[0]
    date = _EPOCH + micros * _MICROSECOND
    url = value[_REST + _MICROS.size :].decode("utf-8", "replace")
    return Original(url, date, payload_digest_of(field + value[:_REST]))


class PayloadIndex(Protocol):
    async def claim(self, sha1: bytes, url: str, date: datetime) -> Original | None:
        """The stored original of this payload; None if ours is to be stored
        whole (it is the first: now indexed; or its field collides)."""

    async def find(self, prefix: bytes) -> Original | None:
        """The original of the payload whose SHA-1 starts with ``prefix`` (8 bytes)."""

    async def release(self, sha1: bytes, url: str, date: datetime) -> None:
        """Forget ours again (its write failed)."""


class RevisitIndex:
    """The crawl's index in its Redis (module doc)."""

    def __init__(
        self, redis: Redis, keys: CrawlKeys, window_seconds: float = CLAIM_WINDOW_SECONDS
    ) -> None:
        self.redis = redis
        self.keys = keys
        self._claim = register_script(redis, _CLAIM)
        self._release = register_script(redis, _RELEASE)
        self._claims: Gatherer[tuple[str, bytes, bytes], Any] = Gatherer(
            self._claim_many, window_seconds
        )

    def _key(self, field: bytes) -> str:
        return self.keys.payload_digests(int.from_bytes(field[:4], "big") % self.keys.shards)

    async def claim(self, sha1: bytes, url: str, date: datetime) -> Original | None:
        field, ours = sha1[:FIELD_BYTES], encode_value(sha1, url, date)
        stored = await self._claims.call((self._key(field), field, ours))
        if stored is None or stored == ours:  # ours (a call sent twice answers ours)
            return None
        if bytes(stored[:_REST]) != sha1[FIELD_BYTES:]:
            return None  # another payload with the same field: stored whole
        return decode_value(field, bytes(stored))

    async def _claim_many(self, claims: list[tuple[str, bytes, bytes]]) -> list[Any]:
        """The claims in one round trip, in order; a failed one's reply is its
        RedisError. Sent again when it may have run: it applies once (a
        second run finds ours and answers it)."""
        calls = [
            Call(self._claim, [key], [field, ours], resend=True) for key, field, ours in claims
        ]
        return await send_calls(self.redis, calls, raise_errors=False, what=WHAT)

    async def find(self, prefix: bytes) -> Original | None:
        field = prefix[:FIELD_BYTES]
        stored = await self.redis.hget(self._key(field), field)  # type: ignore[misc,arg-type]
        return decode_value(field, bytes(stored)) if isinstance(stored, bytes) else None

    async def release(self, sha1: bytes, url: str, date: datetime) -> None:
        field = sha1[:FIELD_BYTES]
        await self._release(keys=[self._key(field)], args=[field, encode_value(sha1, url, date)])


class LocalRevisitIndex:
    """The same in the process, for a crawl without the frontier (one worker)."""

    def __init__(self) -> None:
        self._values: dict[bytes, bytes] = {}

    async def claim(self, sha1: bytes, url: str, date: datetime) -> Original | None:
        field, ours = sha1[:FIELD_BYTES], encode_value(sha1, url, date)
        stored = self._values.setdefault(field, ours)
        if stored == ours or stored[:_REST] != sha1[FIELD_BYTES:]:
            return None
        return decode_value(field, stored)

    async def find(self, prefix: bytes) -> Original | None:
        stored = self._values.get(prefix[:FIELD_BYTES])
        return decode_value(prefix[:FIELD_BYTES], stored) if stored is not None else None

    async def release(self, sha1: bytes, url: str, date: datetime) -> None:
        field = sha1[:FIELD_BYTES]
        if self._values.get(field) == encode_value(sha1, url, date):
            del self._values[field]
