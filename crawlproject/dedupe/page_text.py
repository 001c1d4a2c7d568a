"""A fetched page's text fingerprint, as the duplicate judgement reads it
(middlewares/dedupe.py): its SimHash, its length, and the text itself (the
soft-404 test looks for the page's own path in it)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from scrapy.http import Response, TextResponse

from crawlproject.dedupe.fingerprint import text_fingerprint, visible_text, visible_text_of_tree
from crawlproject.dedupe.soft404 import strip_echo


@dataclass(frozen=True, slots=True)
class Text:
    """A page's text fingerprint, whatever its length."""

    simhash: int | None  # None: not a fingerprinted content type
    chars: int
    text: str

    def echoless(self, url: str) -> int | None:
        """The SimHash of the text without the page's own URL and path (soft404.py)."""
        if self.simhash is None:
            return None
        return text_fingerprint(strip_echo(self.text, url))[0]


NO_TEXT = Text(None, 0, "")


def page_text(response: Response, content_types: Collection[str]) -> Text:
    """The text fingerprint of ``response``; NO_TEXT unless it is a text
    response of one of ``content_types`` (MIME types without parameters)."""
    if not isinstance(response, TextResponse):
        return NO_TEXT
    ctype = (response.headers.get(b"Content-Type") or b"").decode("latin-1").lower()
    if ctype.split(";", 1)[0].strip() not in content_types:
        return NO_TEXT
    try:
        # The tree the spider parsed (for its links) already: no second
        # parse. Whitespace as found: the fingerprint drops it, and the
        # soft-404 echo test looks for a path (no whitespace in it).
        text = visible_text_of_tree(response.selector.root, collapse=False)
    except (AttributeError, ValueError, TypeError):
        text = visible_text(response.text)
    simhash, chars = text_fingerprint(text)
    return Text(simhash, chars, text)
