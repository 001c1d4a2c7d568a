"""Sites an operator seeds and a shop a user writes a spider for, on loopback.

Three sites, each a pure function of its parameters, each on its own loopback
address (``SITE_IPS``), served together on one port by testkit/own_web.py:

* ``DocsSite``: a large documentation site, ``/`` and ``/docs/<k>.html``
  (k = 1 .. pages - 1). Page k links to its children ``10k+1 .. 10k+10`` (a
  10-ary tree: 12,000 pages within 5 links of ``/``), the next page, its
  parent and ``/``.
* ``BlogSite``: a blog of articles with stable ids that look like tokens
  (16 hex digits, a UUID, 10 base62 characters, in turn), each linked once,
  from a prev/next chain of listing pages (``/`` is listing 1, ``/page/<k>``
  the others). Listing k links listings k - 1 and k + 1 and its articles; an
  article links only back to its listing. Articles are ``/post/<hex>``,
  ``/post/<uuid>`` and ``/story/<base62>.html``.
* ``ShopSite``: a shop as a tutorial spider crawls it: listing pages (``/``,
  ``/catalog/<k>``) whose ``a.product`` links lead to products
  (``/product/<n>-<slug>``) and whose ``li.next a`` leads to the next
  listing; every listing also lists a product that is gone (``/product/
  discontinued``: a 404) and a deal behind a redirect chain (``/deal/0`` ->
  ``/deal/1`` -> ... -> ``/deal/<hops>``, a 200 page, ``hops`` redirects).

Any other path is not a site's (the server answers 404). Pages are small (a
heading, ``TEXT_BYTES`` of text drawn from the page's own seed, its links); no
page shows its own path, and no two pages share their text, so neither
duplicate detection nor the soft-404 probe has a reason to touch them.

The docs site has more pages than a seed's host could queue before issue 34
(10 x ``CRAWL_HOST_BUDGET``), the shop more than a host the crawl found by
itself may queue (one vote: ``CRAWL_HOST_BUDGET``); the blog's and the shop's
paginations are longer than ``CRAWL_MAX_DEPTH``.
"""

from __future__ import annotations

import html
import random
import string
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from testkit.testweb import Reply, _paragraphs

DOCS_IP, BLOG_IP, SHOP_IP = "127.0.9.1", "127.0.9.2", "127.0.9.3"
SITE_IPS = (DOCS_IP, BLOG_IP, SHOP_IP)
TEXT_BYTES = 700  # text per page: enough for a SimHash of its own
BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
HTML = "text/html; charset=utf-8"


class Site(Protocol):
    def pages(self) -> list[str]:
        """Every page's path (status 200), ``/`` first."""

    def links(self, path: str) -> list[str]:
        """The root-relative hrefs on the page at ``path``, in page order."""

    def route(self, path: str) -> Reply | None:
        """The answer at ``path``; None: not this site's (a 404)."""


def page_html(
    title: str, seed: str, links: Iterable[tuple[str, str]], extra: str = "", h1_class: str = ""
) -> bytes:
    """A small page: a heading, ``extra`` HTML, text of its own, a list of
    links (href, text)."""
    paragraphs = _paragraphs(random.Random(seed), TEXT_BYTES)
    items = "".join(
        f'<li><a href="{html.escape(href)}">{html.escape(text)}</a></li>' for href, text in links
    )
    h1 = f'<h1 class="{h1_class}">' if h1_class else "<h1>"
    return (
        f"<html><head><title>{html.escape(title)}</title></head><body>"
        f"{h1}{html.escape(title)}</h1>{extra}"
        + "".join(f"<p>{p}</p>" for p in paragraphs)
        + f"<ul>{items}</ul></body></html>"
    ).encode()


@dataclass(frozen=True)
class DocsSite:
    pages_total: int = 12_001
    fanout: int = 10

    def path(self, k: int) -> str:
        return "/" if k == 0 else f"/docs/{k}.html"

    def number(self, path: str) -> int | None:
        if path == "/":
            return 0
        digits = path.removeprefix("/docs/").removesuffix(".html")
        if path.startswith("/docs/") and path.endswith(".html") and digits.isdigit():
            k = int(digits)
            if 0 < k < self.pages_total and str(k) == digits:
                return k
        return None

    def pages(self) -> list[str]:
        return [self.path(k) for k in range(self.pages_total)]

    def _links(self, k: int) -> list[tuple[str, str]]:
        kids = range(self.fanout * k + 1, min(self.fanout * (k + 1) + 1, self.pages_total))
        links = [(self.path(c), f"Section {c}") for c in kids]
        if k + 1 < self.pages_total:
            links.append((self.path(k + 1), "Next"))
        if k:
            links += [(self.path((k - 1) // self.fanout), "Up"), ("/", "Contents")]
        return links

    def links(self, path: str) -> list[str]:
        k = self.number(path)
        return [] if k is None else [href for href, _ in self._links(k)]

    def route(self, path: str) -> Reply | None:
        k = self.number(path)
        if k is None:
            return None
        return Reply(200, HTML, page_html(f"Manual, section {k}", f"docs/{k}", self._links(k)))


def stable_ids(count: int, seed: str) -> list[str]:
    """``count`` distinct ids, in turn 16 hex digits, a UUID and 10 base62
    characters (mixed case and digits), drawn from ``seed``."""
    rng = random.Random(seed)
    ids: list[str] = []
    taken: set[str] = set()
    while len(ids) < count:
        kind = len(ids) % 3
        if kind == 0:
            new = f"{rng.getrandbits(64):016x}"
        elif kind == 1:
            new = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        else:
            new = "".join(rng.choices(BASE62, k=10))
        if new not in taken:
            taken.add(new)
            ids.append(new)
    return ids


class BlogSite:
    def __init__(self, listings: int = 100, per_listing: int = 20, seed: str = "blog") -> None:
        self.listings = listings
        self.per_listing = per_listing
        ids = stable_ids(listings * per_listing, seed)
        # Two layouts: the base62 ids in a file name, the others as a path segment.
        self._articles = [
            f"/story/{i}.html" if n % 3 == 2 else f"/post/{i}" for n, i in enumerate(ids)
        ]
        self._article_of = {path: n for n, path in enumerate(self._articles)}

    def listing_path(self, k: int) -> str:
        return "/" if k == 1 else f"/page/{k}"

    def listing_number(self, path: str) -> int | None:
        if path == "/":
            return 1
        digits = path.removeprefix("/page/")
        if path.startswith("/page/") and digits.isdigit() and str(int(digits)) == digits:
            k = int(digits)
            return k if 2 <= k <= self.listings else None
        return None

    def articles(self, k: int | None = None) -> list[str]:
        """Every article's path, or listing k's."""
        if k is None:
            return list(self._articles)
        return self._articles[(k - 1) * self.per_listing : k * self.per_listing]

    def pages(self) -> list[str]:
        listings = [self.listing_path(k) for k in range(1, self.listings + 1)]
        return listings + self.articles()

    def _listing_links(self, k: int) -> list[tuple[str, str]]:
        links = [(self.listing_path(k - 1), "Newer posts")] if k > 1 else []
        links += [(a, f"Post {(k - 1) * self.per_listing + i + 1}")
                  for i, a in enumerate(self.articles(k))]  # fmt: skip
        if k < self.listings:
            links.append((self.listing_path(k + 1), "Older posts"))
        return links

    def links(self, path: str) -> list[str]:
        if (k := self.listing_number(path)) is not None:
            return [href for href, _ in self._listing_links(k)]
        if (n := self._article_of.get(path)) is not None:
            return [self.listing_path(n // self.per_listing + 1)]
        return []

    def route(self, path: str) -> Reply | None:
        if (k := self.listing_number(path)) is not None:
            body = page_html(f"Blog, page {k}", f"blog/list/{k}", self._listing_links(k))
            return Reply(200, HTML, body)
        if (n := self._article_of.get(path)) is not None:
            back = self.listing_path(n // self.per_listing + 1)
            body = page_html(f"Post {n + 1}", f"blog/post/{n}", [(back, "All posts")])
            return Reply(200, HTML, body)
        return None


PRODUCT_WORDS = ("lamp", "kettle", "chair", "mug", "shelf", "clock", "rug", "vase", "desk", "fan")
PRODUCT_COLOURS = ("blue", "red", "oak", "steel", "green", "white", "black", "amber")
GONE_PRODUCT = "/product/discontinued"


@dataclass(frozen=True)
class ShopSite:
    listings: int = 60
    per_listing: int = 20
    redirect_hops: int = 25

    def listing_path(self, k: int) -> str:
        return "/" if k == 1 else f"/catalog/{k}"

    def listing_number(self, path: str) -> int | None:
        if path == "/":
            return 1
        digits = path.removeprefix("/catalog/")
        if path.startswith("/catalog/") and digits.isdigit() and str(int(digits)) == digits:
            k = int(digits)
            return k if 2 <= k <= self.listings else None
        return None

    def product_name(self, n: int) -> str:
        colour = PRODUCT_COLOURS[n % len(PRODUCT_COLOURS)]
        return f"{colour} {PRODUCT_WORDS[n // len(PRODUCT_COLOURS) % len(PRODUCT_WORDS)]} {n}"

    def product_path(self, n: int) -> str:
        return f"/product/{n}-{self.product_name(n).rsplit(' ', 1)[0].replace(' ', '-')}"

    def products(self) -> dict[str, int]:
        """Each product's path -> the listing that lists it."""
        return {self.product_path(n): n // self.per_listing + 1
                for n in range(self.listings * self.per_listing)}  # fmt: skip

    def product_number(self, path: str) -> int | None:
        head = path.removeprefix("/product/").split("-", 1)[0]
        if path.startswith("/product/") and head.isdigit():
            n = int(head)
            if n < self.listings * self.per_listing and self.product_path(n) == path:
                return n
        return None

    def chain(self) -> list[str]:
        """The redirect chain's paths, its start first and its 200 end last."""
        return [f"/deal/{i}" for i in range(self.redirect_hops + 1)]

    def pages(self) -> list[str]:
        """Every path a crawl should fetch once: listings, products and the 404
        (the redirect chain is apart: ``chain()``)."""
        listings = [self.listing_path(k) for k in range(1, self.listings + 1)]
        return listings + list(self.products()) + [GONE_PRODUCT]

    def price(self, n: int) -> str:
        return f"{5 + (n * 37) % 200}.{n % 100:02d}"

    def _listing_html(self, k: int) -> bytes:
        first = (k - 1) * self.per_listing
        cards = [(self.product_path(n), self.product_name(n), self.price(n))
                 for n in range(first, first + self.per_listing)]  # fmt: skip
        cards += [(GONE_PRODUCT, "walnut stool", "49.00"), ("/deal/0", "deal of the day", "9.99")]
        items = "".join(
            f'<li><a class="product" href="{href}">{html.escape(name)}</a>'
            f' <span class="price">{price}</span></li>'
            for href, name, price in cards
        )
        pager = ""
        if k > 1:
            pager += f'<li class="previous"><a href="{self.listing_path(k - 1)}">Previous</a></li>'
        if k < self.listings:
            pager += f'<li class="next"><a href="{self.listing_path(k + 1)}">Next</a></li>'
        return (
            f"<html><head><title>Catalogue, page {k}</title></head><body>"
            f'<h1>Catalogue, page {k}</h1><ul class="products">{items}</ul>'
            f'<ul class="pager">{pager}</ul></body></html>'
        ).encode()

    def links(self, path: str) -> list[str]:
        if (k := self.listing_number(path)) is not None:
            first = (k - 1) * self.per_listing
            links = [self.product_path(n) for n in range(first, first + self.per_listing)]
            links += [GONE_PRODUCT, "/deal/0"]
            if k > 1:
                links.append(self.listing_path(k - 1))
            if k < self.listings:
                links.append(self.listing_path(k + 1))
            return links
        return ["/"] if self.product_number(path) is not None else []

    def route(self, path: str) -> Reply | None:
        if (k := self.listing_number(path)) is not None:
            return Reply(200, HTML, self._listing_html(k))
        if (n := self.product_number(path)) is not None:
            extra = f'<p class="price">{self.price(n)}</p><p class="sku">SKU-{n:05d}</p>'
            links = [("/", "Catalogue")]
            return Reply(
                200, HTML, page_html(self.product_name(n), f"shop/{n}", links, extra, "name")
            )
        if path == GONE_PRODUCT:
            gone = b"<html><body><h1>Sorry</h1><p>We no longer sell this.</p></body></html>"
            return Reply(404, HTML, gone)
        if path.startswith("/deal/") and path in self.chain():
            i = int(path.removeprefix("/deal/"))
            if i < self.redirect_hops:
                return Reply(302, HTML, b"", (("Location", f"/deal/{i + 1}"),))
            return Reply(200, HTML, page_html("Deal of the day", "shop/deal", [("/", "Shop")]))
        return None
