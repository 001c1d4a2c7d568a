"""Plain text: nothing to extract, but registering it keeps text/plain bodies
stored (the storage pipeline stores the types processors take) and counted."""

from __future__ import annotations

from typing import ClassVar

from scrapy.http import Response

from crawlproject.content import ContentProcessor, ProcessedContent


class PlainTextProcessor(ContentProcessor):
    name: ClassVar[str] = "text"
    mime_types: ClassVar[frozenset[str]] = frozenset({"text/plain"})

    def process(self, response: Response) -> ProcessedContent:
        return ProcessedContent()
