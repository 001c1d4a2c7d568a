"""PDF documents: title, text and page count (pypdf).

The title is the document's /Title metadata, else the first line of its text.
Text is extracted page by page until ``CRAWL_CONTENT_MAX_TEXT_CHARS``
characters or ``CRAWL_CONTENT_PDF_MAX_PAGES`` pages, whichever comes first:
extraction runs on the worker's reactor thread, so one large PDF must not
hold it for long. A PDF that cannot be read (corrupt, truncated, encrypted
with a password) raises ContentError; an owner-password-only PDF (the usual
"no copying" flag) opens with the empty user password and is read.
"""

from __future__ import annotations

import logging
from io import BytesIO
from typing import TYPE_CHECKING, ClassVar, Self

from pypdf import PasswordType, PdfReader
from scrapy.http import Response

from crawlproject.content import (
    TITLE_MAX_CHARS,
    ContentError,
    ContentProcessor,
    ProcessedContent,
)
from crawlproject.setting_values import crawl_setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class PdfProcessor(ContentProcessor):
    name: ClassVar[str] = "pdf"
    mime_types: ClassVar[frozenset[str]] = frozenset({"application/pdf", "application/x-pdf"})

    def __init__(self, max_text_chars: int = 20_000, max_pages: int = 50) -> None:
        self.max_text_chars = max_text_chars
        self.max_pages = max_pages
        # pypdf warns about every flaw of every damaged file ("EOF marker not
        # found"); the spider already counts and logs (once) the files that fail.
        logging.getLogger("pypdf").setLevel(logging.ERROR)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(
            max_text_chars=crawl_setting(crawler.settings, "CRAWL_CONTENT_MAX_TEXT_CHARS"),
            max_pages=crawl_setting(crawler.settings, "CRAWL_CONTENT_PDF_MAX_PAGES"),
        )

    def process(self, response: Response) -> ProcessedContent:
        if not response.body:
            raise ContentError("empty body")
        try:
            reader = PdfReader(BytesIO(response.body))
            if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
                raise ContentError("encrypted PDF (needs a password)")
            page_count = len(reader.pages)
            text = self._text(reader)
            title = _metadata_title(reader)
        except ContentError:
            raise
        except Exception as exc:  # pypdf raises many kinds of error on damaged files
            raise ContentError(f"unreadable PDF: {exc!r}") from exc
        if not title:
            title = next((line.strip() for line in text.splitlines() if line.strip()), "")
        return ProcessedContent(
            {"title": title[:TITLE_MAX_CHARS], "text": text, "page_count": page_count}
        )

    def _text(self, reader: PdfReader) -> str:
        parts: list[str] = []
        chars = 0
        for page in reader.pages[: self.max_pages]:
            page_text = page.extract_text().strip()
            if not page_text:
                continue
            parts.append(page_text)
            chars += len(page_text) + 1
            if chars >= self.max_text_chars:
                break
        return "\n".join(parts)[: self.max_text_chars]


def _metadata_title(reader: PdfReader) -> str:
    metadata = reader.metadata
    title = metadata.title if metadata is not None else None
    return str(title).strip() if title else ""
