"""RSS and Atom feeds: each entry's link goes to the frontier.

Reads RSS 2.0 (``<rss><channel><item><link>``), RSS 1.0 (RDF ``<item>``) and
Atom (``<feed><entry><link rel="alternate" href>``; a link without ``rel`` is
an alternate). The record gets the feed's ``title``, ``feed_format``
(``rss``, ``rdf`` or ``atom``) and ``feed_entries`` (entries read). Relative
links are resolved against the feed's URL. Served as ``application/xml`` or
``text/xml`` (as many feeds are), a document whose root is not a feed is
left alone: no fields, no links. Malformed XML raises ContentError.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar
from urllib.parse import urljoin

from lxml import etree
from scrapy.http import Response

from crawlproject.content import (
    TITLE_MAX_CHARS,
    ContentError,
    ContentProcessor,
    ProcessedContent,
)

ATOM_NS = "http://www.w3.org/2005/Atom"
RSS1_NS = "http://purl.org/rss/1.0/"
RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
FEED_MAX_ENTRIES = 10_000  # entries read per feed; the rest are ignored


class FeedProcessor(ContentProcessor):
    name: ClassVar[str] = "feed"
    mime_types: ClassVar[frozenset[str]] = frozenset(
        {"application/rss+xml", "application/atom+xml", "application/xml", "text/xml"}
    )

    def __init__(self) -> None:
        # No DTDs, entities or network: a feed is untrusted input.
        self._parser = etree.XMLParser(
            resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
        )

    def process(self, response: Response) -> ProcessedContent:
        if not response.body.strip():
            raise ContentError("empty body")
        try:
            root = etree.fromstring(response.body, parser=self._parser)
        except etree.XMLSyntaxError as exc:
            raise ContentError(f"malformed XML: {exc}") from exc
        if root is None:
            raise ContentError("no root element")
        tag = etree.QName(root)
        if tag.localname == "rss" and not tag.namespace:
            channel = root.find("channel")
            title = _text(channel.find("title")) if channel is not None else ""
            links = [_text(item.find("link")) for item in _first(root.iter("item"))]
            kind = "rss"
        elif tag.localname == "RDF" and tag.namespace == RDF_NS:
            title = _text(root.find(f"{{{RSS1_NS}}}channel/{{{RSS1_NS}}}title"))
            links = [
                _text(item.find(f"{{{RSS1_NS}}}link"))
                for item in _first(root.iter(f"{{{RSS1_NS}}}item"))
            ]
            kind = "rdf"
        elif tag.localname == "feed" and tag.namespace == ATOM_NS:
            title = _text(root.find(f"{{{ATOM_NS}}}title"))
            links = [_atom_link(entry) for entry in _first(root.iter(f"{{{ATOM_NS}}}entry"))]
            kind = "atom"
        else:  # XML, but not a feed (served as application/xml, say)
            return ProcessedContent()
        urls = [urljoin(response.url, link) for link in links if link]
        return ProcessedContent(
            {"title": title[:TITLE_MAX_CHARS], "feed_format": kind, "feed_entries": len(links)},
            urls,
        )


def _first(elements: Iterator[etree._Element]) -> Iterator[etree._Element]:
    for count, element in enumerate(elements):
        if count >= FEED_MAX_ENTRIES:
            return
        yield element


def _text(element: etree._Element | None) -> str:
    return "".join(element.itertext()).strip() if element is not None else ""


def _atom_link(entry: etree._Element) -> str:
    for link in entry.iterfind(f"{{{ATOM_NS}}}link"):
        if link.get("rel", "alternate") == "alternate" and link.get("href"):
            return str(link.get("href")).strip()
    return ""
