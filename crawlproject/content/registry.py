"""Which processor reads which MIME type: ``CRAWL_CONTENT_PROCESSORS``.

The setting maps a MIME type to a processor's class path and is merged over
``CRAWL_CONTENT_PROCESSORS_BASE`` (the shipped HTML, plain text, PDF and feed
processors), so a project adds or replaces one type with one line and turns
one off with ``None``. The storage pipeline stores, by default, the bodies of
exactly these types (``CRAWL_STORE_CONTENT_TYPES``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from crawlproject.content.processor import ContentProcessor
from crawlproject.setting_values import ConfigError, crawl_setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def processor_paths(settings: BaseSettings) -> dict[str, str]:
    """MIME type -> class path, the base merged with the project's (None drops a type)."""
    merged: dict[str, str | None] = {}
    for name in ("CRAWL_CONTENT_PROCESSORS_BASE", "CRAWL_CONTENT_PROCESSORS"):
        for mime, path in crawl_setting(settings, name).items():
            merged[str(mime).strip().lower()] = path
    return {mime: str(path) for mime, path in merged.items() if path}


class ContentRegistry:
    def __init__(self, processors: dict[str, ContentProcessor]) -> None:
        self._by_mime = processors

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContentRegistry:
        built: dict[str, ContentProcessor | None] = {}  # class path -> instance (None: off)
        processors: dict[str, ContentProcessor] = {}
        for mime, path in processor_paths(crawler.settings).items():
            if path not in built:
                built[path] = _build(path, crawler)
            processor = built[path]
            if processor is None:
                continue
            if mime not in processor.mime_types:
                logger.warning(
                    "CRAWL_CONTENT_PROCESSORS routes %s to %s, which does not list it",
                    mime,
                    path,
                )
            processors[mime] = processor
        return cls(processors)

    def processor_for(self, mime_type: str) -> ContentProcessor | None:
        return self._by_mime.get(mime_type)

    @property
    def mime_types(self) -> frozenset[str]:
        return frozenset(self._by_mime)


def _build(path: str, crawler: Crawler) -> ContentProcessor | None:
    try:
        cls = load_object(path)
    except (ImportError, NameError, ValueError) as exc:
        raise ConfigError(f"CRAWL_CONTENT_PROCESSORS: cannot load {path!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, ContentProcessor)):
        raise ConfigError(f"CRAWL_CONTENT_PROCESSORS: {path!r} is not a ContentProcessor class")
    try:
        return cls.from_crawler(crawler)
    except NotConfigured as exc:  # Scrapy's convention: the component opts out
        logger.info("Content processor %s is off: %s", path, exc)
        return None
