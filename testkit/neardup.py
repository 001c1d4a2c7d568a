"""The labelled near-duplicate corpus of bench/neardup_quality.py (and of
tests/test_neardup.py): distinct pages that share a vocabulary and a site
template, and edited copies of each.

Two families of distinct pages, both wrapped in one documentation-site template
(a header with the site name and a 24-label navigation bar, a breadcrumb, a
"Last updated" line and a ~600-byte footer of boilerplate):

* ``real``: the documentation text of Python standard library modules, as this
  interpreter holds it (``inspect.getdoc`` of the module and of its public
  functions and classes, in name order): real English, one register, shared
  technical words. A module whose text shares more than a fifth of its word
  5-shingles with a module already taken (``ntpath``/``posixpath``, aliases,
  re-exports) is skipped, so the distinct pages are distinct.
* ``synthetic``: sentences drawn from the test web's 300 common English words
  (Zipf-weighted, testkit/testweb.py), no topic words: pages that share
  their whole vocabulary and differ only in which words come in which order.

Edits (``EDITS``), each applied to every distinct page with its own seeded
random generator: the "Last updated" date, a 15-25-word banner after the
heading, the navigation bar shuffled, 1, 2, 5 or 10 % of the body's words
replaced by other words of the same vocabulary, a paragraph added, a paragraph
removed, and a mirror's copy (banner plus date, as the test web's mirrors).
"""

from __future__ import annotations

import html
import importlib
import importlib.util
import inspect
import pkgutil
import random
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

from testkit.testweb import ENGLISH_WORDS, _sentence

SITE = "Pyramid Reference Library"
NAV = (
    "Home", "Tutorial", "Library", "Language", "Modules", "Glossary", "Index", "Search",
    "Downloads", "Changelog", "FAQ", "Community", "Blog", "Events", "Jobs", "Security",
    "Donate", "Status", "About", "Contact", "Mailing lists", "Chat", "Roadmap", "License",
)  # fmt: skip
FOOTER = (
    "Copyright 2001-2026 the Pyramid Reference Library contributors. All rights reserved. "
    "The documentation is licensed under the terms of the library licence; code samples are "
    "in the public domain. This page was generated from the source of the module by the "
    "documentation builder and may lag behind the released version. Found a mistake? Open "
    "an issue on the tracker or send a patch to the documentation mailing list. Privacy "
    "policy. Terms of use. Cookie settings. Accessibility statement. Hosted by volunteers, "
    "served from a content delivery network sponsored by our partners."
)
BANNER = (
    "Notice: the reference library moves to a new server this weekend and some pages may "
    "be briefly unavailable while we migrate."
)

# Modules whose import starts something (a browser, a GUI, a test run) or prints.
_SKIP_MODULES = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test"}
MIN_PAGE_CHARS, MAX_PAGE_CHARS = 1500, 9000


@dataclass(frozen=True)
class DocPage:
    """A page of the documentation site: template around its own title and paragraphs."""

    title: str
    paragraphs: tuple[str, ...]
    date: str = "2026-03-14"
    nav: tuple[str, ...] = NAV
    banner: str = ""

    def html(self) -> str:
        esc = html.escape
        nav = "".join(f'<li><a href="/{esc(n.lower())}/">{esc(n)}</a></li>' for n in self.nav)
        banner = f'<div class="banner">{esc(self.banner)}</div>\n' if self.banner else ""
        body = "".join(f"<p>{esc(p)}</p>\n" for p in self.paragraphs)
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(self.title)} | {SITE}</title>"
            "<style>nav li{display:inline}</style></head>\n<body>\n"
            f'<header><div class="logo">{SITE}</div><nav><ul>{nav}</ul></nav></header>\n'
            f'<main><p class="crumbs">Home &raquo; Library &raquo; {esc(self.title)}</p>\n'
            f"<h1>{esc(self.title)}</h1>\n{banner}{body}</main>\n"
            f"<footer><p>{FOOTER}</p><p>Last updated: {self.date}</p></footer>\n"
            "</body></html>\n"
        )

    def body_words(self) -> int:
        return sum(len(p.split()) for p in self.paragraphs)


# --- distinct pages ---------------------------------------------------------------------


def _doc_paragraphs(name: str) -> list[str]:
    """The module's documentation as paragraphs: its docstring, then each public
    function's and class's (signature line first), blank-line separated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(name)
    chunks = [inspect.getdoc(module) or ""]
    for attr in sorted(getattr(module, "__all__", None) or dir(module)):
        if attr.startswith("_"):
            continue
        obj = getattr(module, attr, None)
        if getattr(obj, "__module__", None) != name:
            continue
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        doc = inspect.getdoc(obj)
        if doc:
            chunks.append(f"{attr}: {doc}")
    paragraphs = []
    for chunk in chunks:
        for para in chunk.split("\n\n"):
            para = " ".join(para.split())
            if len(para.split()) >= 4:
                paragraphs.append(para)
    return paragraphs


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _module_names() -> list[str]:
    """The standard library's public modules and their packages' public
    submodules (one level: ``email.message``, ``asyncio.tasks``...), sorted."""
    names = set()
    for name in sys.stdlib_module_names:
        if name.startswith("_") or name in _SKIP_MODULES:
            continue
        names.add(name)
        spec = importlib.util.find_spec(name)
        for sub in pkgutil.iter_modules(spec.submodule_search_locations or [] if spec else []):
            if not sub.name.startswith("_") and sub.name not in ("test", "tests", "idle_test"):
                names.add(f"{name}.{sub.name}")
    return sorted(names)


@cache
def real_pages(limit: int = 200) -> tuple[DocPage, ...]:
    """Up to ``limit`` pages of standard library documentation, each of
    MIN_PAGE_CHARS..MAX_PAGE_CHARS of text (whole paragraphs), distinct by
    their word 5-shingles (see the module docstring)."""
    names = _module_names()
    pages: list[DocPage] = []
    taken: list[set[tuple[str, ...]]] = []
    for name in names:
        try:
            paragraphs = _doc_paragraphs(name)
        except Exception:  # not importable here (platform-specific, missing C library)
            continue
        kept, size = [], 0
        for para in paragraphs:
            if size + len(para) > MAX_PAGE_CHARS:
                break
            kept.append(para)
            size += len(para) + 1
        if size < MIN_PAGE_CHARS or len(kept) < 3:
            continue
        shingles = _shingles(" ".join(kept))
        if any(len(shingles & other) > len(shingles) / 5 for other in taken):
            continue
        taken.append(shingles)
        pages.append(DocPage(f"{name} module", tuple(kept)))
        if len(pages) == limit:
            break
    return tuple(pages)


@cache
def synthetic_pages(count: int = 200, seed: int = 20261125) -> tuple[DocPage, ...]:
    """``count`` pages of 1.5-6 KB of sentences of the 300 common words only."""
    rng = random.Random(seed)
    pages = []
    for i in range(count):
        target, size = rng.randint(1500, 6000), 0
        paragraphs = []
        while size < target:
            para = " ".join(_sentence(rng, rng.randint(8, 20)) for _ in range(rng.randint(3, 6)))
            paragraphs.append(para)
            size += len(para) + 1
        title = " ".join(w.capitalize() for w in rng.choices(ENGLISH_WORDS[50:], k=4))
        pages.append(DocPage(f"{title} {i}", tuple(paragraphs)))
    return tuple(pages)


# --- edits --------------------------------------------------------------------------------


def _vocabulary(page: DocPage) -> list[str]:
    return sorted({w for p in page.paragraphs for w in p.split()})


def edit_date(page: DocPage, rng: random.Random) -> DocPage:
    return replace(page, date=f"2026-{rng.randint(4, 12):02d}-{rng.randint(1, 28):02d}")


def edit_banner(page: DocPage, rng: random.Random) -> DocPage:
    return replace(page, banner=BANNER)


def edit_nav(page: DocPage, rng: random.Random) -> DocPage:
    nav = list(page.nav)
    rng.shuffle(nav)
    return replace(page, nav=tuple(nav))


def edit_words(fraction: float) -> Callable[[DocPage, random.Random], DocPage]:
    def edit(page: DocPage, rng: random.Random) -> DocPage:
        """``fraction`` of the body's words replaced by other words of its own text."""
        vocab = _vocabulary(page)
        paragraphs = [p.split() for p in page.paragraphs]
        slots = [(i, j) for i, p in enumerate(paragraphs) for j in range(len(p))]
        for i, j in rng.sample(slots, max(1, round(len(slots) * fraction))):
            paragraphs[i][j] = rng.choice(vocab)
        return replace(page, paragraphs=tuple(" ".join(p) for p in paragraphs))

    return edit


def edit_add_paragraph(page: DocPage, rng: random.Random) -> DocPage:
    """A paragraph of 40-80 words of the page's own vocabulary inserted at random."""
    vocab = _vocabulary(page)
    para = " ".join(rng.choices(vocab, k=rng.randint(40, 80))).capitalize() + "."
    at = rng.randint(0, len(page.paragraphs))
    return replace(page, paragraphs=(*page.paragraphs[:at], para, *page.paragraphs[at:]))


def edit_remove_paragraph(page: DocPage, rng: random.Random) -> DocPage:
    """One paragraph (not the first) removed."""
    at = rng.randrange(1, len(page.paragraphs))
    return replace(page, paragraphs=page.paragraphs[:at] + page.paragraphs[at + 1 :])


def edit_mirror(page: DocPage, rng: random.Random) -> DocPage:
    return edit_date(edit_banner(page, rng), rng)


EDITS: dict[str, Callable[[DocPage, random.Random], DocPage]] = {
    "date": edit_date,
    "banner": edit_banner,
    "nav shuffle": edit_nav,
    "mirror (banner + date)": edit_mirror,
    "words 1%": edit_words(0.01),
    "words 2%": edit_words(0.02),
    "words 5%": edit_words(0.05),
    "words 10%": edit_words(0.10),
    "paragraph added": edit_add_paragraph,
    "paragraph removed": edit_remove_paragraph,
}


def edited_copies(pages: tuple[DocPage, ...], seed: int = 7) -> dict[str, list[DocPage]]:
    """EDITS name -> the edited copy of each page (same order), seeded per edit."""
    out = {}
    for n, (name, edit) in enumerate(EDITS.items()):
        rng = random.Random(seed * 1000 + n)
        out[name] = [edit(page, rng) for page in pages]
    return out
