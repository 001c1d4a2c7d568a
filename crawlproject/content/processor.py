"""What a content processor is: one class per kind of document.

The ``web`` spider hands each fetched answer (2xx) to the processor registered
for its MIME type (``CRAWL_CONTENT_PROCESSORS``, see registry.py). The
processor reads the body and returns a :class:`ProcessedContent`: fields for
the page's fetch record (``title``, ``text``, …) and the URLs it links to,
which the spider filters by its scope and queues like any link. A processor
is built once per spider; ``process`` runs on the reactor thread, so it must
bound its own work (see pipelines/content/pdf.py).

A processor that cannot read a body raises (preferably :class:`ContentError`):
the spider counts ``content/error/<name>``, logs it and keeps the fetch record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self

from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


# A document's title is cut to this many characters in its fetch record.
TITLE_MAX_CHARS = 500


class ContentError(ValueError):
    """The body is not a readable document of the processor's kind."""


@dataclass
class ProcessedContent:
    # Added to the fetch record; the record's own keys (url, status, …) are kept.
    fields: dict[str, Any] = field(default_factory=dict)
    # Absolute URLs to follow. May be lazy (a generator): the spider only
    # iterates it when it follows the page's links (not at max_depth).
    links: Iterable[str] = ()


class ContentProcessor:
    """Base class of content processors: set ``name`` and ``mime_types``, write
    ``process``; override ``from_crawler`` to read settings (once)."""

    # Names the processor in stats (content/processed/<name>, content/error/<name>).
    name: ClassVar[str] = "content"
    # The MIME types it can read (lowercase, no parameters). The settings
    # route types to it; a routed type it does not list is warned about.
    mime_types: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls()

    def process(self, response: Response) -> ProcessedContent:
        raise NotImplementedError


def mime_type_of(response: Response) -> str:
    """The response's MIME type: Content-Type without parameters, lowercased.

    With no Content-Type, the type Scrapy guessed from the URL and body (the
    response class it chose), so a header-less HTML page is still HTML.
    """
    mime = content_type_of(response)
    if mime:
        return mime
    if isinstance(response, HtmlResponse):
        return "text/html"
    if isinstance(response, XmlResponse):
        return "text/xml"
    if isinstance(response, TextResponse):
        return "text/plain"
    return ""


def content_type_of(response: Response) -> str:
    """The Content-Type header without parameters, lowercased ("" without one)."""
    raw = response.headers.get(b"Content-Type") or b""
    return raw.decode("latin-1").split(";", 1)[0].strip().lower()
