"""Scrapy's tutorial spider keeps every quote and every author (issue 41, item 1).

On the embedded default (no Redis of one's own), a scratch copy of the project
gets the spider of docs.scrapy.org's tutorial in its ``spiders/`` (dict items,
one per quote; a declared ``scrapy.Item`` per author page; author pages and
pagination followed with ``response.follow``; no errback) and crawls a loopback
quotes site (testkit/quotes_site.py) whose ``/`` and ``/page/1/`` are the same
bytes and whose listing pages share a site-wide block of text in plain
``<div>``s six times longer than their quotes: its listing pages are near
duplicates of each other by SimHash; it has 3 x NEAR_COPY_HOPS of them, a chain
of near copies longer than web's guard lets pass when they bring no new text.
Promised: every quote and every author in
the ``-O`` feed, each with only the fields the spider gave it; the copied page's
items all dropped (an exact copy: ``CRAWL_DEDUPE_DROP_ITEMS``), counted and said
once at INFO. The same site seeded for ``web``: every listing page fetched (each
shows quotes no other page has: crawlproject/dedupe/new_text.py), and
``web`` stores what it stored before (the exact copy and the near copies not
stored as pages, their links followed).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from crawlproject.dedupe.verdict import NEAR_COPY_HOPS
from testkit.crawlproc import start_worker, stats_of, wait_all
from testkit.own_web import OwnSitesWeb
from testkit.quotes_site import AUTHORS, PER_PAGE, QUOTES_IP, QUOTES_WEB_IP, QuotesSite
from testkit.scratch import scratch_project as copy_project

FAST = {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}

# docs.scrapy.org's tutorial spider: its quotes spider and its author spider in
# one, the author's item declared; both start pages of the tutorial's site.
TUTORIAL_SPIDER = """
import scrapy


class Author(scrapy.Item):
    name = scrapy.Field()
    birthdate = scrapy.Field()
    bio = scrapy.Field()


class QuotesSpider(scrapy.Spider):
    name = "quotes"
    start_urls = ["{root}/", "{root}/page/1/"]

    def parse(self, response):
        for quote in response.css("div.quote"):
            yield {{
                "text": quote.css("span.text::text").get(),
                "author": quote.css("small.author::text").get(),
                "tags": quote.css("div.tags a.tag::text").getall(),
            }}
        for author_link in response.css(".author + a"):
            yield response.follow(author_link, self.parse_author)
        next_page = response.css("li.next a::attr(href)").get()
        if next_page is not None:
            yield response.follow(next_page, callback=self.parse)

    def parse_author(self, response):
        def extract_with_css(query):
            return response.css(query).get(default="").strip()

        yield Author(
            name=extract_with_css("h3.author-title::text"),
            birthdate=extract_with_css(".author-born-date::text"),
            bio=extract_with_css(".author-description::text"),
        )
"""


def scratch_project(tmp_path: Path, root_url: str) -> Path:
    """A copy of the project with the tutorial spider dropped into spiders/."""
    root = copy_project(tmp_path)
    (root / "spiders" / "quotes.py").write_text(TUTORIAL_SPIDER.format(root=root_url))
    return root


def test_the_tutorial_spider_keeps_every_quote_and_web_fetches_every_listing(
    tmp_path: Path,
) -> None:
    site = QuotesSite(listings=3 * NEAR_COPY_HOPS)
    listings = site.listings
    with OwnSitesWeb({QUOTES_IP: site, QUOTES_WEB_IP: site}) as web:
        project = scratch_project(tmp_path, web.base_url(QUOTES_IP))
        out, records = tmp_path / "quotes.jsonl", tmp_path / "web.jsonl"
        # Each on the embedded Redis of its own data directory, as a user runs it.
        quotes = start_worker(
            project, "", None, [], {**FAST, "CRAWL_DATA_DIR": str(tmp_path / "qdata")},
            tmp_path / "quotes.log", extra_args=["-O", str(out)], spider="quotes",
        )  # fmt: skip
        crawler = start_worker(
            project, "", None, [web.url(QUOTES_WEB_IP, "/")],
            {**FAST, "CRAWL_DATA_DIR": str(tmp_path / "wdata")}, tmp_path / "web.log",
            extra_args=["-O", str(records)],
        )  # fmt: skip
        wait_all([quotes, crawler], timeout=240)
    assert quotes.returncode == 0 and crawler.returncode == 0

    items = [json.loads(line) for line in out.read_text().splitlines()]
    quote_items = [i for i in items if "text" in i]
    author_items = [i for i in items if "name" in i]
    # Only the fields the spider gave: nothing of the duplicate filter's.
    assert all(set(i) == {"text", "author", "tags"} for i in quote_items), quote_items[:1]
    assert all(set(i) == {"name", "birthdate", "bio"} for i in author_items), author_items[:1]
    assert len(quote_items) + len(author_items) == len(items)
    # Every quote, once: the exact copy's ten (`/` or `/page/1/`, whichever came
    # second) were all dropped, none of the near copies' (every listing but one).
    expected = Counter(json.dumps(q, sort_keys=True) for q in site.quotes)
    assert Counter(json.dumps(q, sort_keys=True) for q in quote_items) == expected
    assert len(quote_items) == listings * PER_PAGE
    assert sorted(i["name"] for i in author_items) == sorted(site.authors)
    assert len(site.authors) == AUTHORS
    stats = stats_of(quotes.log_path)
    assert stats["dedupe/items_dropped"] == PER_PAGE
    assert stats["dedupe/checked/near"] == listings - 1  # pages 2-10: near copies, kept
    log = quotes.log_path.read_text()
    said = [line for line in log.splitlines() if "Dropped the items of" in line]
    assert len(said) == 1 and " INFO: " in said[0] and "CRAWL_DEDUPE_DROP_ITEMS=False" in said[0]

    # web: every listing page fetched once (by the server's log), every author too.
    fetched = Counter(r.path for r in web.log if r.host_ip == QUOTES_WEB_IP)
    assert {p: fetched[p] for p in site.pages()} == dict.fromkeys(site.pages(), 1), fetched
    # What web stores is as before: a copy (exact or near) is not a page of its own.
    stored = {r["url"].split(str(web.port), 1)[1] for r in map(json.loads, records.open())}
    web_stats = stats_of(crawler.log_path)
    assert web_stats["dedupe/exact"] == 1  # `/page/1/`, the same bytes as `/`
    assert web_stats["dedupe/near"] == listings - 1  # the other listings
    assert stored == {"/", *site.author_paths()}
    assert "dedupe/items_dropped" not in web_stats
    # Each near copy showed quotes its host had not: no chain was cut.
    assert web_stats["dedupe/near_new_text"] == listings - 1
    assert "dedupe/near_hops_exceeded" not in web_stats
