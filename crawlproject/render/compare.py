"""What rendering changed: the raw document against the browser's DOM.

Never a second fetch: the raw document is the answer the crawler already
received (and the browser's navigation was given), the DOM what the browser
built from it. Rendering *matters* where the DOM has links the raw document
lacks, or words of text it lacks; a harmless script (a date, a class name, a
counter) adds a word or two, no links.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urldefrag, urljoin

from lxml import html as lxml_html
from lxml.etree import ParserError

NEW_WORDS_MIN = 12  # words the DOM has and the raw document lacks, to matter
SHELL_TEXT_MAX = 200  # characters of text of a raw page that is only a shell
SHELL_LINKS_MAX = 2
_WORD = re.compile(r"\w{2,}")
_SCRIPT = re.compile(rb"<script[\s>]", re.IGNORECASE)
_INVISIBLE = ("script", "style", "noscript", "template")


@dataclass(frozen=True, slots=True)
class PageContent:
    links: frozenset[str]
    words: frozenset[str]
    text_chars: int

    @classmethod
    def of(cls, body: bytes | str, base_url: str) -> PageContent:
        try:
            root = lxml_html.fromstring(body) if body else None
        except (ParserError, ValueError):
            root = None
        if root is None:
            return cls(frozenset(), frozenset(), 0)
        for element in list(root.iter(*_INVISIBLE)):
            if element.getparent() is not None:  # the root itself stays
                element.drop_tree()
        links = set()
        for href in root.xpath("//a/@href"):
            link = urldefrag(urljoin(base_url, str(href).strip()))[0]
            if link.startswith(("http://", "https://")):
                links.add(link)
        text = " ".join(root.itertext())
        return cls(frozenset(links), frozenset(_WORD.findall(text.lower())), len(text.strip()))

    @property
    def is_shell(self) -> bool:
        """Little text and next to no links: a page built by its scripts."""
        return self.text_chars <= SHELL_TEXT_MAX and len(self.links) <= SHELL_LINKS_MAX


def has_script(body: bytes) -> bool:
    """Whether a raw HTML document has a script at all (one that has none
    renders as it is: nothing to learn)."""
    return _SCRIPT.search(body) is not None


@dataclass(frozen=True, slots=True)
class Difference:
    new_links: int
    new_words: int

    @property
    def matters(self) -> bool:
        return self.new_links > 0 or self.new_words >= NEW_WORDS_MIN


def difference(raw: PageContent, rendered: PageContent) -> Difference:
    return Difference(len(rendered.links - raw.links), len(rendered.words - raw.words))
