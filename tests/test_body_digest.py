"""The body's SHA-1, hashed once per response (crawlproject/body_digest.py)."""

from __future__ import annotations

import hashlib

from scrapy.http import HtmlResponse
from warcio.utils import Digester

from crawlproject.body_digest import body_sha1, payload_digest, payload_digest_of


def test_the_digest_is_the_bodys_sha1_and_kept_per_response() -> None:
    response = HtmlResponse("http://127.0.0.1/a", body=b"<html>a</html>")
    first = body_sha1(response)
    assert first == hashlib.sha1(b"<html>a</html>").digest()
    assert body_sha1(response) is first  # the kept digest, not hashed again


def test_another_response_with_another_body_gets_its_own() -> None:
    response = HtmlResponse("http://127.0.0.1/a", body=b"one")
    replaced = response.replace(body=b"two")
    assert body_sha1(response) == hashlib.sha1(b"one").digest()
    assert body_sha1(replaced) == hashlib.sha1(b"two").digest()


def test_payload_digest_has_warcs_form() -> None:
    for body in (b"", b"hello", bytes(range(256)) * 40):
        digester = Digester("sha1")
        digester.update(body)
        assert payload_digest(body) == str(digester)
        assert payload_digest_of(hashlib.sha1(body).digest()) == str(digester)
