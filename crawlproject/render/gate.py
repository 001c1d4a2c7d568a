"""The gate every request a browser page makes passes (docs/rendering.md).

The browser itself never reaches the network: every request of a page is
routed back to the worker, which refuses it here or fetches it with the
crawler's own HTTP client (through the caching resolver, whose address guard
refuses a host name that resolves to a refused address on connect). Refused
here, before any fetch:

* ``scheme``: not http(s) (the page's ``data:`` URLs never leave the browser);
* ``other_host``: a host other than the page's. Such a request would be a
  contact with that host outside its politeness (its delay, its one slot,
  fleet-wide), so it is not made;
* ``guard``: an IP literal the address guard refuses (``CRAWL_GUARD_*``);
* ``robots``: a path the host's robots.txt disallows (the robots middleware's
  parsed rules of this origin: the page's own request was just checked
  against them, so they are in its cache);
* ``navigation``: the page navigating away from itself (a redirect by script).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from crawlproject.guard.policy import GuardPolicy
from crawlproject.render.templates import host_of

# url -> True (allowed), False (disallowed), None (no rules known: refused).
RobotsCheck = Callable[[str], bool | None]


class BrowserGate:
    def __init__(self, page_url: str, guard: GuardPolicy, robots: RobotsCheck | None) -> None:
        self.host = host_of(page_url)
        self.guard = guard
        self.robots = robots

    def refusal(self, url: str) -> str | None:
        """Why the page's request for ``url`` is not made; None to make it."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            return "scheme"
        if host_of(url) != self.host:
            return "other_host"
        if self.guard.refuses_literal(parts.hostname or ""):
            return "guard"
        if self.robots is not None and not self.robots(url):
            return "robots"
        return None
