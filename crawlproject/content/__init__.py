"""Per-content-type processing of fetched answers (see processor.py, registry.py)."""

from __future__ import annotations

from crawlproject.content.processor import (
    TITLE_MAX_CHARS,
    ContentError,
    ContentProcessor,
    ProcessedContent,
    content_type_of,
    mime_type_of,
)
from crawlproject.content.registry import ContentRegistry, processor_paths

__all__ = [
    "TITLE_MAX_CHARS",
    "ContentError",
    "ContentProcessor",
    "ContentRegistry",
    "ProcessedContent",
    "content_type_of",
    "mime_type_of",
    "processor_paths",
]
