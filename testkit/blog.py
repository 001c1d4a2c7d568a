"""A test web with blogs of stable-id articles and chains that bring nothing new.

``BlogWeb`` is a :class:`~testkit.testweb.TestWeb` whose listed hosts serve,
instead of the graph's pages:

* ``blogs``: a blog of ``articles`` articles, each at ``/post/<id>`` with a
  stable id drawn from the web's seed (``ID_KINDS`` in turn: 32 hex digits, a
  uuid, 22 base62 characters), each with its own text (distinct pages), and
  each linked ONCE: from one listing page. The listings ``/page/1`` ..
  ``/page/<n>`` (``PER_PAGE`` articles each, their titles and a sentence) form
  a prev/next chain from ``/``; an article links back to ``/`` only. So the
  listing chain is ``n`` hops deep, and every article is one hop past its
  listing: neither depth nor the token guard may cut them.
* ``busters``: a site of ``buster_pages`` pages ``/n/1`` .. ``/n/<n>`` on
  one chain from ``/`` (each its own text, each linking the next), every page
  also linking ``/about?v=<token>`` with a token minted per render (a cache
  buster, a parameter the canonicalizer keeps): every such URL serves the same
  about page, so its pages are duplicates of each other.
* ``archives``: a host whose ``/`` (a page of text) links into two endless
  chains of months in both directions: ``/archive/YYYY-MM``, an empty archive
  (a title and "No posts", prev/next: thin pages), and ``/calendar/YYYY-MM``,
  a calendar whose months share one text (near duplicates of each other).

``blog_urls(h)`` lists what a blog host serves (``/``, listings, articles);
``chain_fetches(log, h)`` counts the fetches of an archive host's chain pages.
"""

from __future__ import annotations

import html
import random
import re
import string
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from testkit.testweb import (
    Reply,
    RequestRecord,
    TestWeb,
    _paragraphs,
    canonical_url,
    month_index,
    month_name,
)

ID_KINDS = ("hex", "uuid", "base62")
PER_PAGE = 20
ARCHIVE_START = "2025-01"
_BASE62 = string.digits + string.ascii_letters
_CHAIN = re.compile(r"/(archive|calendar)/(\d{4}-\d{2})")


def stable_id(rng: random.Random, kind: str) -> str:
    if kind == "hex":
        return f"{rng.getrandbits(128):032x}"
    if kind == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return "".join(rng.choice(_BASE62) for _ in range(22))


def _page(title: str, paragraphs: list[str], links: list[tuple[str, str]]) -> bytes:
    items = "".join(f'<li><a href="{href}">{html.escape(text)}</a></li>\n' for href, text in links)
    body = "".join(f"<p>{html.escape(p)}</p>\n" for p in paragraphs)
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}'
        f"</title></head>\n<body><h1>{html.escape(title)}</h1>\n{body}<ul>\n{items}</ul>\n"
        "</body></html>\n"
    ).encode()


class BlogWeb(TestWeb):
    def __init__(
        self,
        blogs: Iterable[int] = (),
        archives: Iterable[int] = (),
        busters: Iterable[int] = (),
        articles: int = 2000,
        buster_pages: int = 300,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("pages", 1)
        super().__init__(**kwargs)
        self.blogs, self.archives = frozenset(blogs), frozenset(archives)
        self.busters = frozenset(busters)
        kinds = (self.blogs, self.archives, self.busters)
        if sum(map(len, kinds)) != len(frozenset().union(*kinds)) or not all(
            1 <= h <= self.hosts for kind in kinds for h in kind
        ):
            raise ValueError("blogs, archives and busters: distinct hosts of this web")
        if articles < 1:
            raise ValueError("articles must be at least 1")
        self.articles, self.buster_pages = articles, buster_pages
        self.listings = -(-articles // PER_PAGE)
        self._ids: dict[int, list[str]] = {}
        for h in sorted(self.blogs):
            rng = random.Random(f"blog/{self.seed}/{h}")
            self._ids[h] = [stable_id(rng, ID_KINDS[i % len(ID_KINDS)]) for i in range(articles)]
        self._article_of = {(h, i): k for h, ids in self._ids.items() for k, i in enumerate(ids)}
        filler = random.Random(f"calendar/{self.seed}")
        self._calendar_text = _paragraphs(filler, 2000)

    # -- what a blog serves ---------------------------------------------------------

    def article_ids(self, h: int) -> list[str]:
        return list(self._ids[h])

    def blog_urls(self, h: int) -> set[str]:
        base = self.base_url(h).rstrip("/")
        urls = {self.base_url(h)}
        urls |= {f"{base}/page/{n}" for n in range(1, self.listings + 1)}
        urls |= {f"{base}/post/{i}" for i in self._ids[h]}
        return {canonical_url(u) for u in urls}

    def buster_urls(self, h: int) -> set[str]:
        """What a busters host serves besides its about page: ``/`` and its chain."""
        base = self.base_url(h).rstrip("/")
        pages = {self.base_url(h)} | {f"{base}/n/{k}" for k in range(1, self.buster_pages + 1)}
        return {canonical_url(u) for u in pages}

    def chain_fetches(self, log: Iterable[RequestRecord], h: int) -> Counter[str]:
        """Fetches of archive host h's chain pages, by chain (archive, calendar)."""
        ip = urlsplit(self.base_url(h)).hostname
        counts: Counter[str] = Counter({"archive": 0, "calendar": 0})
        for rec in log:
            found = _CHAIN.fullmatch(rec.path)
            if rec.host_ip == ip and found and month_index(found.group(2)) is not None:
                counts[found.group(1)] += 1
        return counts

    # -- HTTP -----------------------------------------------------------------------

    def _route(
        self,
        ip: str,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        query: str = "",
    ) -> Reply:
        h = self._host_of.get(ip)
        page = None
        if h in self.blogs:
            page = self._blog_page(h, path)
        elif h in self.archives:
            page = self._archive_page(h, path)
        elif h in self.busters:
            page = self._buster_page(h, path)
        if page is not None:
            return Reply(200, "text/html; charset=utf-8", page)
        return super()._route(ip, method, path, headers, body, query)

    def _blog_page(self, h: int, path: str) -> bytes | None:
        if path == "/":
            text = _paragraphs(random.Random(f"blog/{self.seed}/{h}/home"), 800)
            return _page(f"Blog {h}", text, [("/page/1", "Latest articles")])
        if path.startswith("/page/") and path[6:].isdigit():
            n = int(path[6:])
            if not 1 <= n <= self.listings or path[6:] != str(n):
                return None
            ids = self._ids[h][(n - 1) * PER_PAGE : n * PER_PAGE]
            lines = [f"{self._headline(h, i)}: {_paragraphs(self._rng(h, i), 120)[0]}" for i in ids]
            links = [(f"/post/{i}", self._headline(h, i)) for i in ids]
            links.append(("/" if n == 1 else f"/page/{n - 1}", "Newer articles"))
            if n < self.listings:
                links.append((f"/page/{n + 1}", "Older articles"))
            return _page(f"Blog {h}, page {n}", lines, links)
        if path.startswith("/post/") and (h, path[6:]) in self._article_of:
            i = path[6:]
            return _page(self._headline(h, i), _paragraphs(self._rng(h, i), 1500), [("/", "Home")])
        return None

    def _rng(self, h: int, i: str) -> random.Random:
        return random.Random(f"blog/{self.seed}/{h}/{i}")

    def _headline(self, h: int, i: str) -> str:
        words = _paragraphs(self._rng(h, i), 40)[0].split()[:6]
        return f"Article {self._article_of[h, i]}: " + " ".join(words)

    def _buster_page(self, h: int, path: str) -> bytes | None:
        k = int(path[3:]) if path.startswith("/n/") and path[3:].isdigit() else None
        if path == "/about":  # whatever the query: one page
            text = _paragraphs(random.Random(f"busters/{self.seed}/{h}/about"), 800)
            return _page(f"About site {h}", text, [("/", "Home")])
        if path != "/" and (k is None or not 1 <= k <= self.buster_pages or path[3:] != str(k)):
            return None
        k = k or 0
        text = _paragraphs(random.Random(f"busters/{self.seed}/{h}/{k}"), 800)
        links = [(f"/n/{k + 1}", "Next")] if k < self.buster_pages else []
        links.append((f"/about?v={self.token()}", "About us"))
        return _page(f"Site {h}, page {k}", text, links)

    def _archive_page(self, h: int, path: str) -> bytes | None:
        if path == "/":
            text = _paragraphs(random.Random(f"archive/{self.seed}/{h}/home"), 800)
            links = [(f"/{kind}/{ARCHIVE_START}", kind) for kind in ("archive", "calendar")]
            return _page(f"Site {h}", text, links)
        found = _CHAIN.fullmatch(path)
        month = month_index(found.group(2)) if found else None
        if found is None or month is None:
            return None
        kind = found.group(1)
        links = [(f"/{kind}/{month_name(month + 1)}", "next")]
        if month > 0:
            links.insert(0, (f"/{kind}/{month_name(month - 1)}", "previous"))
        if kind == "archive":  # an empty archive: a title and two words
            return _page(f"Archive {found.group(2)}", ["No posts."], links)
        return _page(f"Events {found.group(2)}", self._calendar_text, links)
