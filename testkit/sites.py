"""Sites built from the test web's special routes, shared by tests and
benchmarks: a site and its mirror (tests/test_dedupe_fleet.py,
bench/trap_spaces.py)."""

from __future__ import annotations

import html
import random
from collections.abc import Callable

from testkit.testweb import TestWeb, _paragraphs, host_ip

SHARED_PAGES = 24  # /doc/1.html .. on a site and on its mirror, the same text


def site_pages(mirror: bool) -> dict[str, dict[str, object]]:
    """A site (``mirror``: its mirror) as special routes: ``/`` and SHARED_PAGES
    pages in a binary tree (page i links to 2i+1 and 2i+2), the same text on both
    hosts; each also links ("See also")
    to a page of its host only (``/a/<i>.html`` on the site, ``/b/<i>.html`` on the
    mirror), which no other page links to: reachable on that host only through
    the copy of a page that may be judged a duplicate."""
    own = "b" if mirror else "a"

    def page(title: str, seed: str, links: list[tuple[str, str]]) -> dict[str, object]:
        paragraphs = _paragraphs(random.Random(seed), 3000)
        items = "".join(f'<li><a href="{href}">{text}</a></li>' for href, text in links)
        body = (
            f"<html><head><title>{html.escape(title)}</title></head><body><h1>"
            f"{html.escape(title)}</h1>"
            + "".join(f"<p>{p}</p>" for p in paragraphs)
            + f"<ul>{items}</ul></body></html>"
        )
        return {"content_type": "text/html; charset=utf-8", "body": body}

    tree = ["/", *(f"/doc/{i}.html" for i in range(1, SHARED_PAGES + 1))]
    routes = {}
    for i, path in enumerate(tree):
        links = [(f"/{own}/{i}.html", "See also")]
        links += [(tree[c], f"Part {c}") for c in (2 * i + 1, 2 * i + 2) if c < len(tree)]
        routes[path] = page(f"Chapter {i}", f"shared/{i}", links)
        routes[f"/{own}/{i}.html"] = page(f"Note {own}{i}", f"{own}/{i}", [("/", "Home")])
    return routes


def site_judged_first(web: TestWeb, site: int) -> Callable[[str], bool]:
    """For ``web.hold`` of the mirror's address: its copy of a shared page
    (``/`` or ``/doc/<i>.html``) is answered only once the site has been asked
    for ``/a/<i>.html``, which only the site's copy of that page links to. A
    worker hands a page's links on only after its verdict is recorded
    (middlewares/dedupe.py: at the page's first item, before its links), so
    the mirror's copy is judged after the site's, however loaded the machine.
    Other paths (``/b/<i>.html``, robots.txt) are not held."""
    ip = host_ip(site)
    tree = ["/", *(f"/doc/{i}.html" for i in range(1, SHARED_PAGES + 1))]
    note = {path: f"/a/{i}.html" for i, path in enumerate(tree)}

    def ready(path: str) -> bool:
        wanted = note.get(path)
        return wanted is None or any(r.host_ip == ip and r.path == wanted for r in web.log)

    return ready
