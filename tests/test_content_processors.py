"""Content processors (crawlproject/content/, pipelines/content/)
on real files made here: unit tests, the spider's dispatch, and one real crawl."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject
from scrapy import Request
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.utils.test import get_crawler

from crawlproject.content import ContentError, ContentProcessor, ProcessedContent, mime_type_of
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY
from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.store.config import BodyStoreConfig
from crawlproject.store.warc_read import read_payload
from pipelines.content.feeds import FeedProcessor
from pipelines.content.pdf import PdfProcessor
from spiders.web import WebSpider
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb

BASE = "http://127.0.3.1:8000/"
HOST = "127.0.3.1:8000"
FAST = {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}


# -- real documents ---------------------------------------------------------------


def make_pdf(pages: list[str], title: str | None = None, user_password: str | None = None) -> bytes:
    """A real PDF written by pypdf: one line of Helvetica text per page."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for text in pages:
        page = writer.add_blank_page(width=612, height=792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        content = DecodedStreamObject()
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        content.set_data(f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1"))
        page.replace_contents(content)
    if title is not None:
        writer.add_metadata({"/Title": title})
    if user_password is not None:
        writer.encrypt(user_password=user_password, owner_password="owner-secret")
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def rss(base: str, links: list[str], title: str = "Example News") -> str:
    items = "".join(
        f"<item><title>Story {i}</title><link>{link}</link>"
        f"<guid isPermaLink='false'>id-{i}</guid><description>&lt;p&gt;text&lt;/p&gt;</description>"
        f"</item>"
        for i, link in enumerate(links)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>'
        f"<title>{title}</title><link>{base}</link><description>news</description>"
        f"{items}</channel></rss>"
    )


def atom(links: list[str], title: str = "Example Atom") -> str:
    entries = "".join(
        f"<entry><title>Entry {i}</title><id>urn:uuid:{i}</id>"
        f"<updated>2025-01-0{i + 1}T00:00:00Z</updated>"
        f'<link rel="edit" href="/edit/{i}"/><link href="{link}"/></entry>'
        for i, link in enumerate(links)
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
        f'<title type="text">{title}</title><id>urn:feed</id>'
        "<updated>2025-01-01T00:00:00Z</updated>"
        f"{entries}</feed>"
    )


def response(
    body: bytes | str,
    content_type: str | None,
    url: str = BASE + "doc",
    cls: type[Response] = Response,
    meta: dict[str, Any] | None = None,
) -> Response:
    headers = {"Content-Type": content_type} if content_type else {}
    data = body.encode() if isinstance(body, str) else body
    return cls(url=url, body=data, headers=headers, request=Request(url, meta=meta or {}))


# -- PDF ----------------------------------------------------------------------------


def test_pdf_title_text_and_pages() -> None:
    pdf = make_pdf(["Quarterly report (2025)", "Second page text"], title="Annual Report")
    result = PdfProcessor().process(response(pdf, "application/pdf"))
    assert result.fields["title"] == "Annual Report"
    assert result.fields["text"] == "Quarterly report (2025)\nSecond page text"
    assert result.fields["page_count"] == 2
    assert list(result.links) == []


def test_pdf_without_title_takes_its_first_line_and_bounds_text() -> None:
    pdf = make_pdf(["First line here", "x" * 80, "never read"])
    result = PdfProcessor(max_text_chars=30, max_pages=2).process(response(pdf, "application/pdf"))
    assert result.fields["title"] == "First line here"
    assert result.fields["text"] == ("First line here\n" + "x" * 80)[:30]
    assert result.fields["page_count"] == 3
    whole = PdfProcessor(max_text_chars=10_000, max_pages=2).process(
        response(pdf, "application/pdf")
    )
    assert "never read" not in whole.fields["text"]  # past CRAWL_CONTENT_PDF_MAX_PAGES


def test_pdf_with_an_owner_password_only_is_read() -> None:
    pdf = make_pdf(["Protected but readable"], title="Locked", user_password="")
    result = PdfProcessor().process(response(pdf, "application/pdf"))
    assert (result.fields["title"], result.fields["text"]) == ("Locked", "Protected but readable")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"<html>not a pdf</html>", id="html"),
        pytest.param(make_pdf(["cut short"], title="T")[:200], id="truncated"),
        pytest.param(make_pdf(["secret"], user_password="pw"), id="encrypted"),
    ],
)
def test_pdf_that_cannot_be_read_raises_content_error(body: bytes) -> None:
    with pytest.raises(ContentError):
        PdfProcessor().process(response(body, "application/pdf"))


# -- feeds --------------------------------------------------------------------------


def test_rss_entry_links_are_resolved_against_the_feed() -> None:
    body = rss(BASE, [BASE + "story/1", "/story/2", "story/3", ""])
    result = FeedProcessor().process(
        response(body, "application/rss+xml", BASE + "news/feed.xml", XmlResponse)
    )
    assert result.fields == {"title": "Example News", "feed_format": "rss", "feed_entries": 4}
    assert list(result.links) == [BASE + "story/1", BASE + "story/2", BASE + "news/story/3"]


def test_atom_entry_alternate_links() -> None:
    result = FeedProcessor().process(
        response(atom([BASE + "a/1", "/a/2"]), "application/atom+xml", BASE + "atom.xml")
    )
    assert result.fields == {"title": "Example Atom", "feed_format": "atom", "feed_entries": 2}
    assert list(result.links) == [BASE + "a/1", BASE + "a/2"]  # rel="edit" is not followed


def test_rss1_rdf_feed() -> None:
    body = (
        '<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"'
        ' xmlns="http://purl.org/rss/1.0/"><channel rdf:about="x"><title>RDF news</title>'
        "</channel><item rdf:about='a'><title>A</title><link>http://127.0.3.1:8000/r/1</link>"
        "</item></rdf:RDF>"
    )
    result = FeedProcessor().process(response(body, "application/rdf+xml"))
    assert result.fields["title"] == "RDF news" and result.fields["feed_format"] == "rdf"
    assert list(result.links) == [BASE + "r/1"]


def test_xml_that_is_not_a_feed_is_left_alone() -> None:
    body = '<?xml version="1.0"?><catalog><book><link>http://x.test/</link></book></catalog>'
    result = FeedProcessor().process(response(body, "application/xml"))
    assert result.fields == {} and list(result.links) == []


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"<rss><channel><item><link>http://x.test/</link>", id="truncated"),
        pytest.param(b"<html><body><p>not xml<br></body></html>", id="html"),
    ],
)
def test_malformed_feed_raises_content_error(body: bytes) -> None:
    with pytest.raises(ContentError):
        FeedProcessor().process(response(body, "application/rss+xml"))


def test_feed_external_entities_are_never_resolved() -> None:
    body = (
        b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
        b"<rss><channel><title>&e;</title></channel></rss>"
    )
    result = FeedProcessor().process(response(body, "application/rss+xml"))
    assert result.fields["title"] == "&e;"  # left as a reference, not read from disk


# -- the spider's dispatch (in memory) ----------------------------------------------


def make_spider(settings: dict[str, Any] | None = None) -> WebSpider:
    crawler = get_crawler(WebSpider, {"CRAWL_STORE_ENABLED": False, **(settings or {})})
    spider = WebSpider.from_crawler(crawler, seeds=BASE)
    assert isinstance(spider, WebSpider)
    return spider


def content_stats(spider: WebSpider) -> dict[str, Any]:
    stats = spider.crawler.stats.get_stats()
    return {k: v for k, v in stats.items() if k.startswith("content/")}


def test_spider_routes_by_mime_type_and_follows_in_scope_links() -> None:
    spider = make_spider()
    feed = rss(BASE, [BASE + "story/1", "http://127.0.9.9/elsewhere"])
    meta = {SCOPE_META_KEY: HOST, "depth": 1}
    item, *requests = spider.parse(
        response(feed, "application/rss+xml; charset=utf-8", BASE + "feed", XmlResponse, meta)
    )
    assert item["title"] == "Example News" and item["feed_entries"] == 2
    assert item["content_type"] == "application/rss+xml; charset=utf-8"
    assert [r.url for r in requests] == [BASE + "story/1"]  # the other host is out of scope
    assert requests[0].meta[SCOPE_META_KEY] == HOST and requests[0].callback == spider.parse
    page = '<html><head><title> Home </title></head><body><a href="/x">x</a></body></html>'
    item, *requests = spider.parse(response(page, "text/html", BASE, HtmlResponse, meta))
    assert item["title"] == "Home" and [r.url for r in requests] == [BASE + "x"]
    assert content_stats(spider) == {
        "content/processed/feed": 1,
        "content/processed/html": 1,
        "content/no_charset": 1,  # the page declared none: Scrapy guessed (crawlproject/limits.py)
    }


def test_unknown_type_keeps_the_record_only() -> None:
    spider = make_spider()
    body = b'{"a": "<a href=\\"/x\\">"}'
    (item,) = spider.parse(response(body, "application/json", cls=TextResponse))
    assert item["status"] == 200 and item["title"] is None and item["length"] == len(body)
    assert content_stats(spider) == {"content/unprocessed/application/json": 1}


def test_failing_processor_is_counted_logged_once_and_the_record_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spider = make_spider()
    with caplog.at_level(logging.DEBUG, logger="spiders.web"):
        for _ in range(3):
            (item,) = spider.parse(response(b"%PDF-1.4 garbage", "application/pdf"))
            assert item["url"] == BASE + "doc" and item["title"] is None and "text" not in item
    assert content_stats(spider) == {"content/error/pdf": 3}
    levels = [r.levelno for r in caplog.records if "Content processor pdf failed" in r.message]
    assert levels == [logging.WARNING, logging.DEBUG, logging.DEBUG]


class LinksThenBoom(ContentProcessor):
    name = "boom"
    mime_types = frozenset({"text/x-boom"})

    def process(self, response: Response) -> ProcessedContent:
        def links() -> Any:
            yield BASE + "one"
            raise RuntimeError("broken halfway")

        # A processor may not replace the record's own keys (url, status, ...).
        return ProcessedContent({"url": "http://evil.test/", "kind": "boom"}, links())


def test_project_processor_one_settings_line_lazy_errors_and_record_keys() -> None:
    spider = make_spider({"CRAWL_CONTENT_PROCESSORS": {"text/x-boom": f"{__name__}.LinksThenBoom"}})
    out = list(spider.parse(response(b"boom", "text/x-boom")))
    assert out[0]["url"] == BASE + "doc" and out[0]["kind"] == "boom"
    assert [r.url for r in out[1:]] == [BASE + "one"]
    assert content_stats(spider) == {"content/processed/boom": 1, "content/error/boom": 1}


def test_processor_can_be_turned_off_and_storage_follows() -> None:
    spider = make_spider({"CRAWL_CONTENT_PROCESSORS": {"application/pdf": None}})
    assert spider.content.processor_for("application/pdf") is None
    assert spider.content.processor_for("text/html") is not None
    settings = spider.crawler.settings
    assert "application/pdf" not in BodyStoreConfig.from_settings(settings).content_types
    defaults = BodyStoreConfig.from_settings(make_spider().crawler.settings).content_types
    assert {"text/html", "text/plain", "application/pdf", "application/rss+xml"} <= defaults


def test_bad_processor_path_fails_at_start() -> None:
    with pytest.raises(ConfigError):
        make_spider({"CRAWL_CONTENT_PROCESSORS": {"text/x": "pipelines.nope.Missing"}})
    with pytest.raises(ConfigError):
        make_spider({"CRAWL_CONTENT_PROCESSORS": {"text/x": "spiders.web.WebSpider"}})


def test_mime_type_without_header_is_scrapys_guess() -> None:
    assert mime_type_of(response(b"<html></html>", None, cls=HtmlResponse)) == "text/html"
    assert mime_type_of(response(b"", "Application/PDF ; x=y")) == "application/pdf"
    assert mime_type_of(response(b"\x00", None)) == ""


# -- a real crawl ------------------------------------------------------------------


def test_crawl_processes_pdf_and_feeds_and_stores_the_pdf(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    pdf = make_pdf(["Findings of the year", "Page two"], title="Crawl Report")
    docs = (
        "<html><head><title>Docs</title></head><body>"
        '<a href="/files/report.pdf">report</a> <a href="/broken.pdf">broken</a>'
        '<a href="/news/feed.xml">rss</a> <a href="/atom">atom</a></body></html>'
    )
    story = "<html><head><title>{}</title></head><body><p>story</p></body></html>"
    html = "text/html; charset=utf-8"
    web = testweb_factory(
        hosts=1, pages=1, latency_ms=0, links=0, cross_links=0, query_variants=0,
        special={1: {
            "/docs.html": {"body": docs, "content_type": html},
            "/files/report.pdf": {"body_b64": base64.b64encode(pdf).decode(),
                                  "content_type": "application/pdf"},
            "/broken.pdf": {"body": "%PDF-1.7 not really", "content_type": "application/pdf"},
            # Entry links: the stories are linked from nowhere else.
            "/news/feed.xml": {"body": rss("{base}/", ["{base}/story/1", "/story/2"]),
                               "content_type": "application/rss+xml"},
            "/atom": {"body": atom(["{base}/story/3"]), "content_type": "application/atom+xml"},
            "/story/1": {"body": story.format("S1"), "content_type": html},
            "/story/2": {"body": story.format("S2"), "content_type": html},
            "/story/3": {"body": story.format("S3"), "content_type": html},
        }},
    )  # fmt: skip
    base = web.base_url(1)
    data = tmp_path / "data"
    out = tmp_path / "items.jsonl"
    proc = start_worker(
        REPO_ROOT, redis_server.url, "content", [base + "docs.html"],
        {**FAST, "CRAWL_DATA_DIR": str(data)},  # .pdf links are fetched by default
        tmp_path / "worker.log", extra_args=["-O", str(out)],
    )  # fmt: skip
    wait_all([proc], timeout=120)
    stats = stats_of(proc.log_path)
    items = {i["url"]: i for i in map(json.loads, out.read_text().splitlines())}
    fetched = ["docs.html", "files/report.pdf", "broken.pdf", "news/feed.xml", "atom"]
    fetched += ["story/1", "story/2", "story/3"]  # reachable through the feeds only
    assert set(items) >= {base + p for p in fetched}
    report = items[base + "files/report.pdf"]
    assert report["title"] == "Crawl Report" and report["page_count"] == 2
    assert report["text"] == "Findings of the year\nPage two"
    stored = read_payload(
        data / "bodies" / report["warc_file"], report["warc_offset"], report["warc_length"]
    )
    assert stored.body == pdf  # application/pdf has a processor, so its body is stored
    broken = items[base + "broken.pdf"]
    assert broken["status"] == 200 and "text" not in broken and "warc_file" in broken
    assert items[base + "news/feed.xml"]["title"] == "Example News"
    assert items[base + "atom"]["feed_format"] == "atom"
    assert items[base + "story/3"]["title"] == "S3"
    assert stats["content/processed/pdf"] == 1 and stats["content/error/pdf"] == 1
    assert stats["content/processed/feed"] == 2
    assert stats["content/processed/html"] == 4  # docs.html and the three stories
