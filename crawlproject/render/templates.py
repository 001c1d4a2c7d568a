"""A URL's page template: what the fleet learns rendering decisions by.

Pages of one template are built by the same code on the server (and in the
browser), so what rendering changed for one is what it changes for the
others. The template is the path with every run of digits as ``N``, the last
segment by its shape (letters ``a``, digits ``N``: ``/post/hello-world`` and
``/post/other-title`` are both ``/post/a-a``), and the query's parameter
names, sorted: ``/item/12.html?id=3&x=y`` -> ``/item/N.a?id&x``.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

_DIGITS = re.compile(r"\d+")
_LETTERS = re.compile(r"[^\W\d_]+")
SEGMENT_MAX = 40  # a longer segment (an id, a hash) is one shape: "*"
SEGMENTS_MAX = 8  # deeper paths share the template of their first 8 segments


def _shape(segment: str) -> str:
    if len(segment) > SEGMENT_MAX:
        return "*"
    return _DIGITS.sub("N", _LETTERS.sub("a", segment))


def page_template(url: str) -> str:
    parts = urlsplit(url)
    segments = parts.path.split("/")[1:]
    head = [_DIGITS.sub("N", s) if len(s) <= SEGMENT_MAX else "*" for s in segments[:-1]]
    last = [_shape(segments[-1])] if segments else []
    path = "/" + "/".join((head + last)[:SEGMENTS_MAX])
    names = sorted({name for name, _ in parse_qsl(parts.query, keep_blank_values=True)})
    return path + ("?" + "&".join(names) if names else "")


def host_of(url: str) -> str:
    """The host (and a port that is not the scheme's default), lower case:
    what the fleet learns decisions by, with the template."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return host if port is None or port == default else f"{host}:{port}"
