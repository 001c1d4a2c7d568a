"""A quotes site as Scrapy's tutorial crawls it (quotes.toscrape.com's shape), on loopback.

``QuotesSite`` (a testkit/own_sites.py ``Site``, served by testkit/own_web.py):

* 10 listing pages of 10 quotes each: ``/`` and ``/page/1/`` (byte for byte the
  same page), ``/page/2/`` .. ``/page/10/``. A quote is ``div.quote`` with
  ``span.text``, ``small.author``, an ``(about)`` link to its author's page
  right after the author, and ``div.tags a.tag``. A listing links the next
  (``li.next a``) and the previous (``li.previous a``) listing.
* ``/author/<slug>/``, one page per author (``h3.author-title``,
  ``span.author-born-date``, ``div.author-description``), linking back to ``/``.

Every listing page carries the same site-wide block, in plain ``<div>``s (no
``<nav>``, no sidebar class, so nothing takes it for boilerplate): a tag box
and an "about" text ``BOILERPLATE_TIMES`` times longer than the page's quotes.
Its listing pages are therefore near duplicates of each other by SimHash,
though each carries quotes and a "Next" link no other page has.
"""

from __future__ import annotations

import html
import random
from typing import Any

from testkit.testweb import Reply, _paragraphs

QUOTES_IP, QUOTES_WEB_IP = "127.0.41.1", "127.0.41.2"
LISTINGS = 10
PER_PAGE = 10
AUTHORS = 20
# The site-wide block's text, in multiples of a page's quotes (their HTML): at 6
# every two listing pages are within 3 bits of each other (CRAWL_SIMHASH_K).
BOILERPLATE_TIMES = 6
HTML = "text/html; charset=utf-8"
TAGS = ("love", "life", "books", "humor", "truth", "hope", "wisdom", "time", "change", "music")
WORDS_TEXT = (
    "the world we have created is a process of our thinking it cannot be changed "
    "without changing minds there are only two ways to live your life one is as though "
    "nothing is a miracle other everything person man or woman who has not pleasure in "
    "good novel must be intolerably stupid imperfection beauty madness genius and it's "
    "better absolutely ridiculous than boring try become success rather value"
)


def _slug(name: str) -> str:
    return name.replace(" ", "-").replace(".", "")


class QuotesSite:
    def __init__(self, seed: str = "quotes", listings: int = LISTINGS) -> None:
        rng = random.Random(seed)
        self.listings = listings
        words = WORDS_TEXT.split()
        first = ["Albert", "Jane", "Marilyn", "Andre", "Thomas", "Eleanor", "Steve", "Mark"]
        last = ["Einstein", "Austen", "Monroe", "Gide", "Edison", "Roosevelt", "Martin", "Twain"]
        names: list[str] = []
        while len(names) < AUTHORS:
            name = f"{rng.choice(first)} {rng.choice('ABCDEFGHJKLMNPRSTW')}. {rng.choice(last)}"
            if name not in names:
                names.append(name)
        self.authors = names
        self.quotes: list[dict[str, Any]] = []
        for n in range(listings * PER_PAGE):
            chosen = [rng.choice(words) for _ in range(rng.randint(10, 16))]
            text = f"\u201c{' '.join(chosen).capitalize()} ({n + 1}).\u201d"
            author = names[n % AUTHORS]
            tags = sorted(rng.sample(TAGS, rng.randint(1, 3)))
            self.quotes.append({"text": text, "author": author, "tags": tags})
        self.bios = {a: " ".join(_paragraphs(random.Random(f"{seed}/{a}"), 500)) for a in names}
        quotes_chars = max(len(self._quotes_html(k)) for k in range(1, listings + 1))
        about = _paragraphs(random.Random(f"{seed}/about"), BOILERPLATE_TIMES * quotes_chars)
        tag_box = "".join(f'<span class="tag-item"><a class="tag">{t}</a></span>' for t in TAGS)
        self.block = (
            f'<div class="col-md-4 tags-box"><h2>Top Ten tags</h2>{tag_box}</div>'
            '<div class="about"><h2>About this site</h2>'
            + "".join(f"<div>{html.escape(p)}</div>" for p in about)
            + "</div>"
        )

    # -- what a test checks against ---------------------------------------------

    def listing_paths(self) -> list[str]:
        return ["/", *(f"/page/{k}/" for k in range(1, self.listings + 1))]

    def author_paths(self) -> list[str]:
        return [f"/author/{_slug(a)}/" for a in self.authors]

    # -- the Site protocol --------------------------------------------------------

    def pages(self) -> list[str]:
        return [*self.listing_paths(), *self.author_paths()]

    def links(self, path: str) -> list[str]:
        return [p for p in self.pages() if f'href="{p}"'.encode() in self._page(path)]

    def route(self, path: str) -> Reply | None:
        return Reply(200, HTML, self._page(path)) if path in self.pages() else None

    # -- pages ---------------------------------------------------------------------

    def _page(self, path: str) -> bytes:
        if path.startswith("/author/"):
            return self._author_page(self.author_paths().index(path))
        k = 1 if path == "/" else int(path.split("/")[2])
        pager = ""
        if k > 1:
            pager += f'<li class="previous"><a href="/page/{k - 1}/">Previous</a></li>'
        if k < self.listings:
            pager += f'<li class="next"><a href="/page/{k + 1}/">Next</a></li>'
        return (
            "<html><head><title>Quotes to Scrape</title></head><body>"
            '<div class="container"><div class="row header-box"><div class="col-md-8">'
            '<h1><a href="/">Quotes to Scrape</a></h1></div></div>'
            f'<div class="row"><div class="col-md-8">{self._quotes_html(k)}'
            f'<ul class="pager">{pager}</ul></div>{self.block}</div></div></body></html>'
        ).encode()

    def _quotes_html(self, k: int) -> str:
        parts = []
        for quote in self.quotes[(k - 1) * PER_PAGE : k * PER_PAGE]:
            author = str(quote["author"])
            tags = "".join(f'<a class="tag">{t}</a>' for t in quote["tags"])
            parts.append(
                '<div class="quote">'
                f'<span class="text">{html.escape(str(quote["text"]))}</span>'
                f'<span>by <small class="author">{html.escape(author)}</small>'
                f' <a href="/author/{_slug(author)}/">(about)</a></span>'
                f'<div class="tags">Tags: {tags}</div></div>'
            )
        return "".join(parts)

    def _author_page(self, n: int) -> bytes:
        name = self.authors[n]
        return (
            f"<html><head><title>{html.escape(name)}</title></head><body>"
            '<div class="container"><h1><a href="/">Quotes to Scrape</a></h1>'
            f'<div class="author-details"><h3 class="author-title">{html.escape(name)}</h3>'
            f'<p>Born: <span class="author-born-date">March {n + 1}, 18{50 + n}</span></p>'
            f'<div class="author-description">{html.escape(self.bios[name])}</div>'
            "</div></div></body></html>"
        ).encode()
