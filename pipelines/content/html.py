"""HTML pages: their title, and their links (Scrapy's LinkExtractor)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar, Self
from urllib.parse import urlparse

from scrapy.http import Response, TextResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from crawlproject.content import ContentProcessor, ProcessedContent
from crawlproject.setting_values import crawl_setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class HtmlProcessor(ContentProcessor):
    name: ClassVar[str] = "html"
    mime_types: ClassVar[frozenset[str]] = frozenset({"text/html", "application/xhtml+xml"})

    def __init__(self, deny_extensions: Sequence[str] = IGNORED_EXTENSIONS) -> None:
        # Scrapy's extractor tests a link's path against each denied extension
        # in turn (url_has_any_extension: ~90 endswith calls a link, 1-1.5 % of
        # a CPU-bound worker, bench/crawl_rate.py --part profile). The same test
        # (urlparse's path, lowercased, ends with ".ext") is one endswith of a
        # tuple here, on the extracted links: the same links, in the same order.
        self.link_extractor = LinkExtractor(unique=True, deny_extensions=[])
        self.deny_suffixes = tuple(sorted({"." + ext for ext in deny_extensions}))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        # The extractor drops what the URL rules would refuse anyway, from the
        # same setting: taking "pdf" out of CRAWL_DENY_EXTENSIONS lets PDF links
        # through both (Scrapy's extractor would still drop them by default).
        return cls(crawl_setting(crawler.settings, "CRAWL_DENY_EXTENSIONS"))

    def process(self, response: Response) -> ProcessedContent:
        if not isinstance(response, TextResponse):  # no text to parse
            return ProcessedContent({"title": None})
        # Parses the page once: the duplicate filter reuses response.selector.
        title = (response.css("title::text").get() or "").strip()
        return ProcessedContent({"title": title}, self._links(response))

    def _links(self, response: TextResponse) -> Iterator[str]:
        # Lazy: extraction costs CPU, and a page at max_depth is not followed.
        deny = self.deny_suffixes
        for link in self.link_extractor.extract_links(response):
            if not (deny and urlparse(link.url).path.lower().endswith(deny)):
                yield link.url
