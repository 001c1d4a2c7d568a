"""A delay-bound test web that looks like the web a crawl meets (issue 43).

What the plain delay farm (``bench/crawl_rate.py --part delay --farm plain``)
lacks, each of which takes a detour through the frontier's claim, release,
duplicate and redirect paths:

* every host's ``/robots.txt`` says ``Crawl-delay`` (the crawl's delay) and
  ``Disallow: /private/``, and every page links two disallowed URLs (one the
  same on every page, as a menu's "log in", one its own: a "share" link);
* a third of the hosts mirror another host (``mirrors``): their pages are
  near copies of the source's, judged near-duplicate by the crawl;
* one page in six links a redirect (``/go/k``: a 302 to ``/p/k``) and one in
  six a 404 (``/gone/k``);
* links across hosts (``cross_links``), as the plain farm has.

``web_like_options`` gives the ``WebProcess`` / ``TestWeb`` options.
"""

from __future__ import annotations

from typing import Any

DISALLOWED_PREFIX = "/private/"
SITE_LINKS = {
    f"{DISALLOWED_PREFIX}login": 1,  # the same disallowed URL on every page
    f"{DISALLOWED_PREFIX}share?page={{k}}": 1,  # a disallowed URL of each page's own
    "/go/{k}": 6,  # a 302 to /p/k (k = 0, 6, 12, ...: /go/0 leads to a 404)
    "/gone/{k}": 6,  # a 404
}


def robots_txt(crawl_delay: float) -> str:
    return f"User-agent: *\nCrawl-delay: {crawl_delay:g}\nDisallow: {DISALLOWED_PREFIX}\n"


def web_like_options(
    hosts: int,
    pages: int,
    crawl_delay: float,
    latency_ms: tuple[float, float] = (10, 80),
    seed: int = 1,
    mirror_share: float = 1 / 3,
) -> dict[str, Any]:
    """Options of a web-like farm: the last ``mirror_share`` of the hosts mirror the first."""
    robots = {"/robots.txt": {"body": robots_txt(crawl_delay)}}
    n_mirrors = int(hosts * mirror_share)
    return {
        "hosts": hosts,
        "pages": pages,
        "latency_ms": latency_ms,
        "seed": seed,
        "cross_links": 2,
        "realistic": True,
        "special": {h: dict(robots) for h in range(1, hosts + 1)},
        "mirrors": {hosts - n_mirrors + i: 1 + i for i in range(n_mirrors)},
        "site_links": dict(SITE_LINKS),
    }
