"""The HTML processor's links are exactly Scrapy's LinkExtractor's (its
extension test done once per link with a tuple, pipelines/content/html.py)."""

from __future__ import annotations

import pytest
from scrapy.http import HtmlResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor

from pipelines.content.html import HtmlProcessor

BASE = "http://127.0.3.1:8000/dir/page.html"
HREFS = [
    "/a",
    "/b.pdf",
    "/B.PDF",  # the path is lowercased, the extension list is not
    "/c.pdf;v=1",  # urlparse's path leaves the ;params out
    "/c.pdf;v=1/d",
    "/d.jpg?size=2",
    "/e?file=x.pdf",  # the query does not count
    "/f.tar.gz",
    "/g.gz",
    "/h.html",
    "/i.pdf#top",
    "../up.zip",
    "//other.example/j.mp4",
    "http://other.example/k",
    "/a",  # a repeat: unique
    "/l.PDFX",
    "/m.",
    "/n.docx",
    "mailto:x@example.com",
]


def page(hrefs: list[str]) -> HtmlResponse:
    body = "".join(f'<a href="{h}">{i}</a>' for i, h in enumerate(hrefs))
    return HtmlResponse(BASE, body=f"<html><body>{body}</body></html>", encoding="utf-8")


@pytest.mark.parametrize(
    "deny",
    [
        pytest.param(IGNORED_EXTENSIONS, id="scrapy-default"),
        pytest.param(["pdf", "gz", "PDFX"], id="own-list"),
        pytest.param([], id="none"),
    ],
)
def test_links_are_scrapys(deny: list[str]) -> None:
    response = page(HREFS)
    # What the processor did before: Scrapy's extractor with the list (empty: no test).
    extractor = LinkExtractor(unique=True, deny_extensions=list(deny))
    scrapy_links = [link.url for link in extractor.extract_links(response)]
    ours = list(HtmlProcessor(deny).process(response).links)
    assert ours == scrapy_links
    assert len(set(ours)) == len(ours)
