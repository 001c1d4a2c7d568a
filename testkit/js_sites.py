"""A loopback test web for rendering (tests/test_render*.py, bench/render_rate.py).

Three sites, each on its own loopback address, served together on one port by
:class:`JsWeb` (testkit/own_web.py's server, with each site's own robots.txt):

* ``JsOnlySite`` (``JS_IP``): every page is the same shell (a title, an empty
  ``div#app``, ``/static/app.js``); the script fetches ``/api/<path>.json``
  and builds the page's text and links from it. ``/`` links ``/app/1`` ..
  ``/app/<pages>``, each app page the next one. The script also tries what a
  page must never get: ``/private/data.json`` (robots.txt disallows
  ``/private/``) and a link-local metadata address (another host, and one the
  address guard refuses).
* ``StaticSite`` (``STATIC_IP``): ``/`` and ``/p/<k>.html``, text and links in
  the HTML, and a harmless script (``/static/year.js`` writes the year).
* ``MixedSite`` (``MIXED_IP``): static listing pages (``/``, ``/list/<k>``,
  with the harmless script) each linking the next listing, the first
  ``details`` of them a detail page ``/item/<k>``: a shell whose script
  fetches ``/api/item/<k>.json`` for its text and a link.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from testkit.own_sites import HTML, page_html
from testkit.own_web import OwnSitesWeb
from testkit.testweb import Reply, _paragraphs

JS_IP, STATIC_IP, MIXED_IP = "127.0.45.1", "127.0.45.2", "127.0.45.3"
JS_SITE_IPS = (JS_IP, STATIC_IP, MIXED_IP)
JSON_TYPE = "application/json"
SCRIPT_TYPE = "application/javascript"
METADATA_URL = "http://169.254.169.254/latest/meta-data/"
ROBOTS_DISALLOW = "User-agent: *\nDisallow: /private/\n"

SHELL = (
    '<html><head><title>{title}</title><script src="{script}"></script></head>'
    '<body><div id="app"></div></body></html>'
)
# Builds the page from its JSON after the load event, as single-page apps do.
APP_JS = """
window.addEventListener('load', function () {
  var api = '/api' + (location.pathname === '/' ? '/index' : location.pathname) + '.json';
  fetch('/private/data.json').catch(function () {});
  fetch('METADATA_URL').catch(function () {});
  fetch(api).then(function (r) { return r.json(); }).then(function (data) {
    var app = document.getElementById('app');
    var h = document.createElement('h1'); h.textContent = data.title; app.appendChild(h);
    var p = document.createElement('p'); p.textContent = data.text; app.appendChild(p);
    data.links.forEach(function (href) {
      var a = document.createElement('a'); a.href = href; a.textContent = href;
      app.appendChild(a);
    });
  });
});
""".replace("METADATA_URL", METADATA_URL)
YEAR_JS = (
    "document.addEventListener('DOMContentLoaded', function () {"
    " var y = document.getElementById('year'); if (y) { y.textContent = '2026'; } });"
)
YEAR_SPAN = '<p>Copyright <span id="year"></span></p><script src="/static/year.js"></script>'


def _text(seed: str) -> str:
    return " ".join(_paragraphs(random.Random(seed), 500))


class JsOnlySite:
    robots_txt = ROBOTS_DISALLOW

    def __init__(self, pages: int = 3) -> None:
        self.count = pages

    def pages(self) -> list[str]:
        return ["/"] + [f"/app/{k}" for k in range(1, self.count + 1)]

    def api_paths(self) -> list[str]:
        return ["/api/index.json"] + [f"/api/app/{k}.json" for k in range(1, self.count + 1)]

    def links(self, path: str) -> list[str]:
        if path == "/":
            return [f"/app/{k}" for k in range(1, self.count + 1)]
        k = int(path.rsplit("/", 1)[1])
        return ["/"] + ([f"/app/{k + 1}"] if k < self.count else [])

    def route(self, path: str) -> Reply | None:
        if path in self.pages():
            return Reply(200, HTML, SHELL.format(title="App", script="/static/app.js").encode())
        if path == "/static/app.js":
            return Reply(200, SCRIPT_TYPE, APP_JS.encode())
        if path == "/private/data.json":
            return Reply(200, JSON_TYPE, b'{"secret": true}')
        if path in self.api_paths():
            page = "/" if path == "/api/index.json" else path[4:-5]
            data = {"title": f"App page {page}", "text": _text(page), "links": self.links(page)}
            return Reply(200, JSON_TYPE, json.dumps(data).encode())
        return None


class StaticSite:
    def __init__(self, pages: int = 30) -> None:
        self.count = pages

    def pages(self) -> list[str]:
        return ["/"] + [f"/p/{k}.html" for k in range(1, self.count + 1)]

    def links(self, path: str) -> list[str]:
        k = 0 if path == "/" else int(path[3:-5])
        return ["/"] + ([f"/p/{k + 1}.html"] if k < self.count else [])

    def route(self, path: str) -> Reply | None:
        if path in self.pages():
            links = [(href, href) for href in self.links(path)]
            return Reply(200, HTML, page_html(f"Static {path}", path, links, extra=YEAR_SPAN))
        if path == "/static/year.js":
            return Reply(200, SCRIPT_TYPE, YEAR_JS.encode())
        return None


class MixedSite:
    def __init__(self, listings: int = 11, details: int = 4) -> None:
        self.count = listings
        self.details = details

    def listing_paths(self) -> list[str]:
        return ["/"] + [f"/list/{k}" for k in range(1, self.count)]

    def detail_paths(self) -> list[str]:
        return [f"/item/{k}" for k in range(self.details)]

    def pages(self) -> list[str]:
        return self.listing_paths() + self.detail_paths()

    def links(self, path: str) -> list[str]:
        if path.startswith("/item/"):
            k = int(path[6:])
            return ["/" if k == 0 else f"/list/{k}"]
        k = 0 if path == "/" else int(path[6:])
        item = [f"/item/{k}"] if k < self.details else []
        return item + ([f"/list/{k + 1}"] if k + 1 < self.count else [])

    def route(self, path: str) -> Reply | None:
        if path in self.listing_paths():
            links = [(href, href) for href in self.links(path)]
            return Reply(200, HTML, page_html(f"Listing {path}", path, links, extra=YEAR_SPAN))
        if path in self.detail_paths():
            return Reply(200, HTML, SHELL.format(title="Item", script="/static/item.js").encode())
        if path == "/static/year.js":
            return Reply(200, SCRIPT_TYPE, YEAR_JS.encode())
        if path == "/static/item.js":
            return Reply(200, SCRIPT_TYPE, APP_JS.replace(METADATA_URL, "/api/none.json").encode())
        if path.startswith("/api/item/") and path.endswith(".json"):
            page = path[4:-5]
            if page in self.detail_paths():
                data = {"title": f"Item {page}", "text": _text(page), "links": self.links(page)}
                return Reply(200, JSON_TYPE, json.dumps(data).encode())
        return None


class BusySite:
    """One page whose script polls ``/api/tick.json`` every 100 ms for ever:
    never quiet, so its render ends at the time limit."""

    def pages(self) -> list[str]:
        return ["/"]

    def route(self, path: str) -> Reply | None:
        if path == "/":
            body = (
                "<html><head><title>Busy</title></head><body><p id='n'>0</p><script>"
                "setInterval(function () { fetch('/api/tick.json').then(function (r) {"
                " return r.json(); }).then(function (d) {"
                " document.getElementById('n').textContent = d.tick; }); }, 100);"
                "</script></body></html>"
            )
            return Reply(200, HTML, body.encode())
        if path == "/api/tick.json":
            return Reply(200, JSON_TYPE, b'{"tick": 1}')
        return None


class JsWeb(OwnSitesWeb):
    """The three sites (or those given), each host with its own robots.txt."""

    def __init__(self, sites: dict[str, object] | None = None) -> None:
        super().__init__(sites or {  # type: ignore[arg-type]
            JS_IP: JsOnlySite(), STATIC_IP: StaticSite(), MIXED_IP: MixedSite()
        })  # fmt: skip

    def answer(self, ip: str, path: str) -> Reply:
        robots = getattr(self.sites.get(ip), "robots_txt", None)
        if path == "/robots.txt" and robots is not None:
            return Reply(200, "text/plain", robots.encode())
        return super().answer(ip, path)


def browser_pids(marker: str) -> list[int]:
    """Processes whose environment carries ``marker`` and that are Chromium's:
    a test worker's browsers (Playwright's driver and Chromium inherit the
    worker's environment)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ and b"chrom" in cmdline:
            found.append(int(entry))
    return found
