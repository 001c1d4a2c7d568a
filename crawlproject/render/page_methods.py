"""scrapy-playwright's ``playwright_page_methods`` as data, so that a request
carrying them travels through the shared frontier (stored as JSON, never as a
live object): ``PageMethod("wait_for_selector", "div.quote", timeout=5000)``
<-> ``{"method": "wait_for_selector", "args": ["div.quote"], "kwargs":
{"timeout": 5000}}``. A method given as a callable cannot be stored: it is
refused (:class:`NotStorable`) and the caller drops it with one log line.
"""

from __future__ import annotations

import json
from typing import Any

from scrapy_playwright.page import PageMethod

# Meta keys of scrapy-playwright that hold live objects: never stored. A
# Page given back in meta (playwright_include_page) cannot outlive its worker.
LIVE_META_KEYS = ("playwright_page", "playwright_include_page", "playwright_page_init_callback")


class NotStorable(ValueError):
    pass


def to_data(methods: object) -> list[dict[str, Any]]:
    """JSON-safe forms of a list (or dict) of PageMethod and of such forms."""
    items = methods.values() if isinstance(methods, dict) else methods
    if not isinstance(items, list | tuple | type({}.values())):
        raise NotStorable(f"playwright_page_methods {methods!r} is not a list")
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict):
            form = item
        elif isinstance(item, PageMethod):
            if not isinstance(item.method, str):
                raise NotStorable(f"{item!r}: a callable cannot travel through the frontier")
            form = {"method": item.method, "args": list(item.args), "kwargs": dict(item.kwargs)}
        else:
            raise NotStorable(f"{item!r} is not a PageMethod")
        try:
            json.dumps(form)
        except (TypeError, ValueError) as exc:
            raise NotStorable(f"{item!r}: its arguments are not JSON ({exc})") from None
        out.append(form)
    return out


def from_data(data: object) -> list[PageMethod]:
    """PageMethods again (PageMethod objects given as they are)."""
    if not data:
        return []
    items = data.values() if isinstance(data, dict) else data
    methods: list[PageMethod] = []
    for item in items if isinstance(items, list | tuple | type({}.values())) else ():
        if isinstance(item, PageMethod):
            methods.append(item)
        elif isinstance(item, dict) and isinstance(item.get("method"), str):
            methods.append(
                PageMethod(item["method"], *item.get("args", ()), **item.get("kwargs", {}))
            )
    return methods
