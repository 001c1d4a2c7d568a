"""The SHA-1 of a response's body, hashed once per response.

Three parts read it for every page: the duplicate filter (middlewares/dedupe.py:
the raw digest), the recrawl record (middlewares/recrawl.py: hex) and the body
store (pipelines/store.py and the WARC writer: ``sha1:<BASE32>``, the form of
WARC-Payload-Digest and of CDX digests). :func:`body_sha1` hashes a response's
body the first time it is asked and keeps the digest beside that response (a
weak reference: the entry goes with the response), so the others find it
there instead of hashing the body again. A response whose body was replaced
(``response.replace(body=...)`` makes a new response anyway) is hashed anew:
the entry holds the body it was computed from and is used only for that same
object.

A bottom-layer module (hashlib and weakref only): the spider, the middlewares,
the dedupe index and the store all sit above it.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from weakref import WeakKeyDictionary

# response -> (the body hashed, its SHA-1). Used on the reactor's thread only.
_digests: WeakKeyDictionary[Any, tuple[bytes, bytes]] = WeakKeyDictionary()


def body_sha1(response: Any) -> bytes:
    """The 20-byte SHA-1 of ``response.body``, hashed once per response."""
    body: bytes = response.body
    cached = _digests.get(response)
    if cached is not None and cached[0] is body:
        return cached[1]
    digest = hashlib.sha1(body).digest()
    _digests[response] = (body, digest)
    return digest


def payload_digest_of(sha1: bytes) -> str:
    """``sha1:<BASE32>`` of a 20-byte SHA-1 (WARC-Payload-Digest's form)."""
    return "sha1:" + base64.b32encode(sha1).decode("ascii")


def payload_digest(data: bytes) -> str:
    """``sha1:<BASE32>`` of ``data``: the form of WARC-Payload-Digest (and of CDX digests)."""
    return payload_digest_of(hashlib.sha1(data).digest())
