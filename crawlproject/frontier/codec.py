"""Requests to compact JSON and back: never pickle.

``Request.to_dict`` gives the request's data with callbacks as method names.
Fields equal to their defaults are left out (a plain GET of a link is about
``{"url": ...}`` plus its depth), bytes go as base64, and on the way back only
allowlisted request classes and public spider methods are accepted: whoever can
write to Redis can queue URLs, not run code on workers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict

# meta keys that belong to the frontier's bookkeeping and are never stored.
PRIVATE_META_KEYS = frozenset({"crawl_lease"})

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


class RequestDecodeError(ValueError):
    """A stored request could not be turned back into a Request."""


class RequestEncodeError(ValueError):
    """A request holds data that JSON cannot carry (e.g. an object in meta)."""


class RequestCodec:
    def __init__(self, allowed_classes: Iterable[str]) -> None:
        self._allowed = frozenset(allowed_classes)

    def encode(self, request: Request, spider: Spider | None) -> bytes:
        # Request.to_dict() finds callback names with inspect.getmembers() on
        # every call (~40 us); a direct attribute check gives the same names.
        d: dict[str, Any] = {attr: getattr(request, attr) for attr in request.attributes}
        d["callback"] = _method_name(spider, request.callback)
        d["errback"] = _method_name(spider, request.errback)
        d["headers"] = dict(request.headers)
        if type(request) is not Request:
            d["_class"] = f"{type(request).__module__}.{type(request).__name__}"
        out: dict[str, Any] = {}
        for key, value in d.items():
            if key == "meta":
                value = {k: v for k, v in value.items() if k not in PRIVATE_META_KEYS}
            if key in _DEFAULTS and value == _DEFAULTS[key]:
                continue
            if key == "headers":
                value = {_latin1(k): [_latin1(v) for v in vs] for k, vs in value.items()}
            elif key == "body":
                value = base64.b64encode(value).decode("ascii")
            out[key] = value
        try:
            return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise RequestEncodeError(f"{request!r} is not JSON-serialisable: {exc}") from exc

    def decode(self, data: bytes | str, spider: Spider | None) -> Request:
        try:
            d = json.loads(data)
        except ValueError as exc:
            raise RequestDecodeError(f"not JSON: {exc}") from exc
        if not isinstance(d, dict) or not isinstance(d.get("url"), str):
            raise RequestDecodeError("not a request object")
        cls_path = d.get("_class")
        if cls_path is not None and cls_path not in self._allowed:
            raise RequestDecodeError(f"request class {cls_path!r} is not allowed")
        for name in ("callback", "errback"):
            method = d.get(name)
            if method is not None and (not isinstance(method, str) or method.startswith("_")):
                raise RequestDecodeError(f"{name} {method!r} is not a public spider method")
        if "body" in d:
            d["body"] = base64.b64decode(d["body"])
        if "headers" in d:
            d["headers"] = {
                k.encode("latin-1"): [v.encode("latin-1") for v in vs]
                for k, vs in d["headers"].items()
            }
        try:
            return request_from_dict(d, spider=spider)
        except (TypeError, ValueError, KeyError) as exc:
            raise RequestDecodeError(str(exc)) from exc


def _latin1(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _method_name(spider: Spider | None, func: Any) -> str | None:
    if func is None or isinstance(func, str):
        return func
    name = getattr(func, "__name__", None)
    bound = getattr(spider, name, None) if spider is not None and name else None
    if bound is None or getattr(bound, "__func__", None) is not getattr(func, "__func__", func):
        raise RequestEncodeError(f"{func!r} is not a method of the spider {spider!r}")
    return str(name)
