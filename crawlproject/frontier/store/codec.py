"""Requests to compact bytes and back: never pickle.

Most queued URLs are links of the ``web`` spider: a GET with callback
``parse``, errback ``on_error`` and meta ``{"depth": d, "crawl_scope": the
URL's host[:port]}``. The frontier stores only what differs from that::

    tag [depth] url ["\\n" extra]

* ``tag``: one byte, ``0x40 + bits``: 1 callback ``parse``, 2 errback
  ``on_error``, 4 ``crawl_scope`` is the URL's own host[:port], and bits 8-16
  say how ``url`` is written: 0 whole. In a host's queue, whose key gives it
  back (:func:`stored_form`), the URL after ``http://`` + key + ``/`` (tag
  ``0x60 + bits``), ``https://`` + key + ``/`` (``0x68 + bits``) or the key +
  ``/`` of a key with its scheme (``0x70 + bits``): the ``/`` a URL has after
  its host, dropped (1 byte a URL) unless a digit follows it (it would read as
  the depth's). Versions before 2026-12-08 kept it: 1 after the key, 2 after
  ``http://`` + key, 3 after ``https://`` + key (``0x48``-``0x5F``, still read);
* ``depth``: meta ``depth`` in decimal when it is a non-negative int (a URL
  never starts with a digit, so nothing separates them);
* ``extra``: everything else, a JSON object of the fields that are not their
  defaults (as ``Request.to_dict``, callbacks by method name, bytes as
  base64, headers as latin-1 text, ``meta``: its other keys), e.g.
  ``{"priority":2,"meta":{"redirect_times":1}}``.

A link of 70 characters costs about 50 bytes instead of 170. The whole JSON
object of earlier versions (``{"url": ...}``, what recrawl_promote.lua still
writes) is read too.

What is stored is what Scrapy's own ``request_to_dict`` / ``request_from_dict``
carry: a callback or errback that is a method of the spider, private ones
(``_parse_x``, a name-mangled ``__x`` as ``_Spider__x``) included, found as
Scrapy's ``_find_method`` finds it (by the function, not by its name); a
Request subclass by its import path; ``cb_kwargs``, ``meta``, ``flags``,
``priority``, headers, cookies, body, encoding and ``dont_filter``. A request
that cannot be stored raises :class:`RequestEncodeError` naming the kind
(``reason``), when the spider yields it.

Security: whoever can write to Redis can queue URLs, not run code on workers.
On the way back a callback must name a method of the spider (never a dunder);
``_class`` must name a subclass of ``scrapy.Request`` that is either in a
module this worker imported already (the spider's, Scrapy's, its plugins') or
listed in ``CRAWL_REQUEST_CLASSES`` (a class path, or ``package.*``: the only
imports a stored request may cause). Nothing but a Request subclass is ever
instantiated, with the Request attributes as keyword arguments.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider

from crawlproject.frontier.store.storable import (
    RequestClasses,
    RequestDecodeError,
    RequestEncodeError,
    SpiderMethods,
    spider_method,
)

__all__ = ["RequestCodec", "RequestDecodeError", "RequestEncodeError", "stored_form", "whole_form"]

# meta keys that belong to the frontier's bookkeeping and are never stored.
PRIVATE_META_KEYS = frozenset({"crawl_lease"})
# The web spider's link: its callbacks and its meta (crawlproject/frontier/basics/request_meta.py's
# SCOPE_META_KEY; spelled here so that the codec stays below everything else).
DEFAULT_CALLBACK = "parse"
DEFAULT_ERRBACK = "on_error"
SCOPE_KEY = "crawl_scope"
DEPTH_KEY = "depth"

TAG_BASE = 0x40
CALLBACK_BIT, ERRBACK_BIT, SCOPE_BIT = 1, 2, 4
URL_SHIFT = 3  # bits 8 and 16: how the URL is written
URL_WHOLE, URL_AFTER_KEY, URL_AFTER_HTTP, URL_AFTER_HTTPS = 0, 1, 2, 3
_URL_PREFIX = {URL_AFTER_HTTP: b"http://", URL_AFTER_HTTPS: b"https://"}
# A stored form without the "/" after the key: tag SLASHLESS_BASE + flags + (form
# << 3), form 0 / 1 / 2 for URL_AFTER_HTTP / URL_AFTER_HTTPS / URL_AFTER_KEY
# (0x60-0x77: never "{", 0x7B, a JSON object's first byte).
SLASHLESS_BASE = 0x60
_SLASHLESS_FORM = {URL_AFTER_HTTP: 0, URL_AFTER_HTTPS: 1, URL_AFTER_KEY: 2}
_SLASHLESS_PREFIX = (b"http://", b"https://", b"")
_FLAGS = CALLBACK_BIT | ERRBACK_BIT | SCOPE_BIT
_DIGITS = b"0123456789"

_DEFAULTS: dict[str, Any] = {
    "callback": None,
    "errback": None,
    "method": "GET",
    "headers": {},
    "body": b"",
    "cookies": {},
    "meta": {},
    "encoding": "utf-8",
    "priority": 0,
    "dont_filter": False,
    "flags": [],
    "cb_kwargs": {},
}


def host_root(url: str) -> str | None:
    """``host[:port]`` of ``url`` as the web spider writes its scope (lowercase,
    the port only when the URL names one); None when it has none."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    return f"{host}:{port}" if port else host


class RequestCodec:
    def __init__(self, allowed_classes: Iterable[str]) -> None:
        self.classes = RequestClasses(allowed_classes)
        self._methods = SpiderMethods()

    def encode(self, request: Request, spider: Spider | None) -> bytes:
        """The compact form (module docstring), its URL whole."""
        url = request.url
        if not url[:1].isalpha() or "\n" in url:
            return self._encode_json(request, spider)
        bits = 0
        extra: dict[str, Any] = {}
        callback = self._method_name(spider, request.callback, "callback")
        if callback == DEFAULT_CALLBACK:
            bits |= CALLBACK_BIT
        elif callback is not None:
            extra["callback"] = callback
        errback = self._method_name(spider, request.errback, "errback")
        if errback == DEFAULT_ERRBACK:
            bits |= ERRBACK_BIT
        elif errback is not None:
            extra["errback"] = errback
        depth = ""
        meta = {k: v for k, v in request.meta.items() if k not in PRIVATE_META_KEYS}
        d = meta.get(DEPTH_KEY)
        if type(d) is int and d >= 0:
            depth = str(d)
            del meta[DEPTH_KEY]
        scope = meta.get(SCOPE_KEY)
        if scope is not None and scope == host_root(url):
            bits |= SCOPE_BIT
            del meta[SCOPE_KEY]
        if meta:
            extra["meta"] = meta
        self._put_attributes(request, extra)
        head = chr(TAG_BASE + bits) + depth + url
        if not extra:
            return head.encode("utf-8")
        return (head + "\n" + _dumps(request, extra)).encode("utf-8")

    def _encode_json(self, request: Request, spider: Spider | None) -> bytes:
        """The whole JSON object (earlier versions' form), for URLs the compact
        form cannot hold."""
        out: dict[str, Any] = {"url": request.url}
        callback, errback = (
            self._method_name(spider, request.callback, "callback"),
            self._method_name(spider, request.errback, "errback"),
        )
        meta = {k: v for k, v in request.meta.items() if k not in PRIVATE_META_KEYS}
        for attr, value in (("callback", callback), ("errback", errback), ("meta", meta)):
            if value != _DEFAULTS[attr]:
                out[attr] = value
        self._put_attributes(request, out)
        return _dumps(request, out).encode("utf-8")

    def decode(self, data: bytes | str, spider: Spider | None) -> Request:
        raw = data.encode("utf-8") if isinstance(data, str) else data
        if raw[:1] == b"{":
            try:
                d = json.loads(raw)
            except ValueError as exc:
                raise RequestDecodeError(f"not JSON: {exc}") from exc
            if not isinstance(d, dict) or not isinstance(d.get("url"), str):
                raise RequestDecodeError("not a request object")
        else:
            d = _compact_dict(raw)
        return self._from_dict(d, spider)

    def _from_dict(self, d: dict[str, Any], spider: Spider | None) -> Request:
        cls_path = d.pop("_class", None)
        cls = Request if cls_path is None else self.classes.resolve(cls_path)
        for name in ("callback", "errback"):
            method = d.get(name)
            if method is not None and spider is not None:
                d[name] = spider_method(spider, method, name)
        try:
            if "body" in d:
                d["body"] = base64.b64decode(d["body"])
            if "headers" in d:
                d["headers"] = {
                    k.encode("latin-1"): [v.encode("latin-1") for v in vs]
                    for k, vs in d["headers"].items()
                }
            # As Scrapy's request_from_dict, but with the class and the methods
            # resolved here (never load_object on what Redis holds).
            return cls(**{k: v for k, v in d.items() if k in cls.attributes})
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise RequestDecodeError(str(exc)) from exc

    def _method_name(self, spider: Spider | None, func: Any, field: str) -> str | None:
        return self._methods.name_of(spider, func, field)

    def _put_attributes(self, request: Request, out: dict[str, Any]) -> None:
        """Every attribute but url, callback, errback and meta that differs from a
        plain Request's default, and the class when it is not Request: what both
        stored forms carry beyond their own fields."""
        for attr in request.attributes:
            if attr in ("url", "callback", "errback", "meta"):
                continue
            value = getattr(request, attr)
            if attr in _DEFAULTS and value == _DEFAULTS[attr]:
                continue
            out[attr] = _jsonable(attr, value)
        cls = type(request)
        if cls is not Request:
            path = f"{cls.__module__}.{cls.__name__}"
            try:
                stored = self.classes.resolve(path)
            except RequestDecodeError as exc:
                raise RequestEncodeError(str(exc), "request_class") from exc
            if stored is not cls:
                raise RequestEncodeError(
                    f"request class {cls!r} is not importable as {path!r}", "request_class"
                )
            out["_class"] = path


def _compact_dict(raw: bytes) -> dict[str, Any]:
    """The request dict of a compact form, its URL whole."""
    if not raw:
        raise RequestDecodeError("empty request")
    bits = raw[0] - TAG_BASE
    if SLASHLESS_BASE <= raw[0] < SLASHLESS_BASE + 24:
        raise RequestDecodeError("a stored request read without its host key")
    if not 0 <= bits < 32:
        raise RequestDecodeError(f"not a stored request (first byte {raw[:1]!r})")
    if bits >> URL_SHIFT != URL_WHOLE:
        raise RequestDecodeError("a stored request read without its host key")
    head, _, extra = raw[1:].partition(b"\n")
    i = 0
    while i < len(head) and head[i] in _DIGITS:
        i += 1
    try:
        url = head[i:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestDecodeError(f"URL not UTF-8: {exc}") from exc
    d: dict[str, Any] = {"url": url}
    meta: dict[str, Any] = {}
    if i:
        meta[DEPTH_KEY] = int(head[:i])
    if bits & SCOPE_BIT:
        meta[SCOPE_KEY] = host_root(url)
    if bits & CALLBACK_BIT:
        d["callback"] = DEFAULT_CALLBACK
    if bits & ERRBACK_BIT:
        d["errback"] = DEFAULT_ERRBACK
    if extra:
        try:
            more = json.loads(extra)
        except ValueError as exc:
            raise RequestDecodeError(f"extra fields not JSON: {exc}") from exc
        if not isinstance(more, dict) or not isinstance(more.get("meta", {}), dict):
            raise RequestDecodeError("extra fields not an object")
        meta.update(more.pop("meta", {}))
        more.pop("url", None)
        d.update(more)
    if meta:
        d["meta"] = meta
    return d


def _url_at(data: bytes) -> int:
    """Where the URL of a compact form starts (after its tag and depth)."""
    i, n = 1, len(data)
    while i < n and 48 <= data[i] <= 57:  # digits
        i += 1
    return i


@lru_cache(maxsize=65_536)
def _key_prefixes(key: str) -> tuple[tuple[int, bytes], ...]:
    """The URL beginnings a politeness key stands for, with their tag bits."""
    k = key.encode("utf-8")
    if b"://" in k:  # a key with its scheme (earlier host keys) starts the URL itself
        return ((URL_AFTER_KEY, k),)
    return tuple((how, prefix + k) for how, prefix in _URL_PREFIX.items())


def stored_form(data: bytes, key: str) -> bytes:
    """``data`` as a host queue stores it: its URL without the politeness key
    ``key`` (host key or registered domain) it starts with, if it does, and
    without the ``/`` after the key unless a digit follows it."""
    # Only a compact form whose URL is whole: tags 0x40..0x47.
    if len(data) < 2 or not TAG_BASE <= data[0] < TAG_BASE + (1 << URL_SHIFT):
        return data
    i = _url_at(data) if 48 <= data[1] <= 57 else 1
    for how, prefix in _key_prefixes(key):
        if data.startswith(prefix, i):
            end = i + len(prefix)
            if data[end : end + 1] != b"/":
                return data
            after = data[end + 1 : end + 2]
            if not (after and 48 <= after[0] <= 57):  # a digit would read as the depth's
                tag = SLASHLESS_BASE + (data[0] & _FLAGS) + (_SLASHLESS_FORM[how] << URL_SHIFT)
                return bytes((tag,)) + data[1:i] + data[end + 1 :]
            return bytes((data[0] | how << URL_SHIFT,)) + data[1:i] + data[end:]
    return data


def whole_form(data: bytes, key: str) -> bytes:
    """The inverse of :func:`stored_form`: the URL whole again."""
    if not data:
        return data
    tag = data[0]
    if SLASHLESS_BASE <= tag < SLASHLESS_BASE + 24:
        i = _url_at(data)
        start = _SLASHLESS_PREFIX[(tag - SLASHLESS_BASE) >> URL_SHIFT] + key.encode("utf-8")
        return bytes((TAG_BASE + (tag & _FLAGS),)) + data[1:i] + start + b"/" + data[i:]
    how = (tag - TAG_BASE) >> URL_SHIFT
    if not 0 < how < 4:  # whole already, or a JSON object ("{": 0x7B)
        return data
    i = _url_at(data)
    start = _URL_PREFIX.get(how, b"") + key.encode("utf-8")
    return bytes((tag & ~(3 << URL_SHIFT),)) + data[1:i] + start + data[i:]


def url_of(data: bytes) -> str | None:
    """The URL of a request in its whole form (compact or JSON); None if unreadable."""
    try:
        if data[:1] == b"{":
            return str(json.loads(data)["url"])
        return str(_compact_dict(data.partition(b"\n")[0])["url"])
    except (ValueError, KeyError, TypeError, RequestDecodeError):
        return None


def _jsonable(attr: str, value: Any) -> Any:
    if attr == "headers":
        return {_latin1(k): [_latin1(v) for v in vs] for k, vs in value.items()}
    if attr == "body":
        return base64.b64encode(value).decode("ascii")
    return value


def _dumps(request: Request, obj: dict[str, Any]) -> str:
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
        if not text.isascii():
            text.encode("utf-8")  # a lone surrogate cannot be stored as UTF-8
        return text
    except (TypeError, ValueError) as exc:
        reason = next((k for k, v in obj.items() if not _json_ok(v)), "other")
        raise RequestEncodeError(
            f"{request!r}: its {reason} cannot be stored as JSON: {exc}", reason
        ) from exc


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError):
        return False
    return True


def _latin1(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value
