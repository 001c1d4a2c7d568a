"""The sites of testkit/own_sites.py: their graphs (pure) and their server."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from collections import Counter, deque
from collections.abc import Iterator
from itertools import pairwise

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings.default_settings import REDIRECT_MAX_TIMES as SCRAPY_REDIRECT_MAX_TIMES
from scrapy.utils.project import get_project_settings

from crawlproject.default_settings import CRAWL_HOST_BUDGET, CRAWL_MAX_DEPTH
from testkit.own_sites import (
    BLOG_IP,
    DOCS_IP,
    GONE_PRODUCT,
    SHOP_IP,
    BlogSite,
    DocsSite,
    ShopSite,
    Site,
    stable_ids,
)
from testkit.own_web import OwnSitesWeb
from testkit.testweb import page_counts, politeness_report
from tests.spiders_for_tests.shop import ShopSpider

HREF = re.compile(rb'href="([^"]*)"')
HEX, UUID = re.compile(r"[0-9a-f]{16}"), re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")
BASE62 = re.compile(r"[0-9A-Za-z]{10}")


def depths(site: Site) -> dict[str, int]:
    """Each page reachable from ``/`` and the fewest links to it."""
    seen, queue = {"/": 0}, deque(["/"])
    while queue:
        path = queue.popleft()
        for link in site.links(path):
            if link not in seen:
                seen[link] = seen[path] + 1
                queue.append(link)
    return seen


def rendered_links(site: Site, path: str) -> list[str]:
    reply = site.route(path)
    assert reply is not None and reply.status == 200, path
    return [h.decode() for h in HREF.findall(reply.payload)]


def test_stable_ids_are_distinct_and_look_like_tokens() -> None:
    ids = stable_ids(3000, "t")
    assert len(set(ids)) == 3000
    assert all(HEX.fullmatch(i) for i in ids[0::3])
    assert all(UUID.fullmatch(i) for i in ids[1::3])
    base62 = ids[2::3]
    assert all(BASE62.fullmatch(i) for i in base62)
    mixed = [i for i in base62 if re.search("[a-z]", i) and re.search("[A-Z]", i)]
    assert len(mixed) >= 0.9 * len(base62)  # mixed case, as base62 ids are
    assert stable_ids(30, "t") == ids[:30] and stable_ids(30, "u") != ids[:30]


def test_blog_chain_links_every_article_once() -> None:
    blog = BlogSite()
    assert len(blog.pages()) == 100 + 2000 == len(set(blog.pages()))
    reach = depths(blog)
    assert set(reach) == set(blog.pages())
    assert reach[blog.listing_path(100)] == 99 > CRAWL_MAX_DEPTH
    articles = set(blog.articles())
    listing_of = {a: k for k in range(1, 101) for a in blog.articles(k)}
    inbound: Counter[str] = Counter()
    for path in blog.pages():
        links = blog.links(path)
        assert links == rendered_links(blog, path)
        inbound.update(links)
        if path in articles:  # back to its listing only
            assert links == [blog.listing_path(listing_of[path])], (path, links)
    assert all(inbound[a] == 1 for a in articles), "an article linked twice or never"
    for k in (1, 2, 50, 100):
        links = blog.links(blog.listing_path(k))
        listings = [blog.listing_number(link) for link in links if link not in articles]
        assert listings == [n for n in (k - 1, k + 1) if 1 <= n <= 100]
        assert [link for link in links if link in articles] == blog.articles(k)
        assert len(blog.articles(k)) == 20
    assert blog.route("/page/101") is None and blog.route("/page/01") is None
    assert blog.route("/post/notanid") is None


def test_docs_site_is_large_and_shallow() -> None:
    docs = DocsSite()
    reach = depths(docs)
    assert set(reach) == set(docs.pages()) and len(reach) >= 12_000
    assert len(reach) > 10 * CRAWL_HOST_BUDGET  # a seed's budget before issue 34: 10 votes
    assert max(reach.values()) <= 5
    for path in docs.pages()[:50] + docs.pages()[-50:]:
        assert docs.links(path) == rendered_links(docs, path)
    assert docs.route(f"/docs/{docs.pages_total}.html") is None
    assert docs.route("/docs/007.html") is None


def test_shop_listings_products_gone_page_and_redirect_chain() -> None:
    shop = ShopSite()
    # Longer than the project's REDIRECT_MAX_TIMES and Scrapy's default.
    assert shop.redirect_hops > max(
        get_project_settings().getint("REDIRECT_MAX_TIMES"), SCRAPY_REDIRECT_MAX_TIMES
    )
    products = shop.products()
    assert len(products) == 1200 == len(set(products))
    # More URLs than a host found by the crawl may queue (one vote), and a
    # pagination longer than the depth guard's bound: only a seed's host, and
    # a guard that follows pagination, fetch it whole.
    assert len(shop.pages()) > CRAWL_HOST_BUDGET and shop.listings > CRAWL_MAX_DEPTH
    assert set(depths(shop)) == set(shop.pages()) | {"/deal/0"}
    for path in shop.pages():
        if path != GONE_PRODUCT:
            assert shop.links(path) == rendered_links(shop, path)
    gone = shop.route(GONE_PRODUCT)
    assert gone is not None and gone.status == 404
    chain = shop.chain()
    for here, there in pairwise(chain):
        hop = shop.route(here)
        assert hop is not None and hop.status == 302 and dict(hop.headers)["Location"] == there
    end = shop.route(chain[-1])
    assert end is not None and end.status == 200
    assert shop.route(f"/deal/{shop.redirect_hops + 1}") is None


def test_shop_spider_follows_products_with_its_private_callback() -> None:
    shop = ShopSite()
    spider = ShopSpider(shop="http://shop.test/")
    assert spider.start_urls == ["http://shop.test/"]
    reply = shop.route(shop.listing_path(3))
    assert reply is not None
    listing = HtmlResponse("http://shop.test/catalog/3", body=reply.payload)
    out = list(spider.parse(listing, page=3))
    assert all(isinstance(r, Request) and r.errback is None for r in out)
    follows = [r for r in out if r.callback == spider._parse_product]
    wanted = [p for p, k in shop.products().items() if k == 3] + [GONE_PRODUCT, "/deal/0"]
    assert [r.url for r in follows] == [f"http://shop.test{p}" for p in wanted]
    assert all(r.cb_kwargs == {"listing": 3} for r in follows)
    (more,) = [r for r in out if r.callback == spider.parse]
    assert more.url == "http://shop.test/catalog/4" and more.cb_kwargs == {"page": 4}
    n = 45
    page = shop.route(shop.product_path(n))
    assert page is not None
    product = HtmlResponse(f"http://shop.test{shop.product_path(n)}", body=page.payload)
    (item,) = spider._parse_product(product, listing=3)
    assert item == {
        "name": shop.product_name(n),
        "price": shop.price(n),
        "sku": f"SKU-{n:05d}",
        "listing": 3,
        "url": product.url,
    }


@pytest.fixture
def slow_web() -> Iterator[OwnSitesWeb]:
    with OwnSitesWeb({DOCS_IP: DocsSite(50), BLOG_IP: BlogSite(3, 2)}, latency=0.3) as web:
        yield web


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_server_logs_requests_and_counts_them_in_flight(slow_web: OwnSitesWeb) -> None:
    docs, blog = slow_web.base_url(DOCS_IP), slow_web.base_url(BLOG_IP)
    assert get(docs + "/robots.txt") == 200 and get(docs + "/docs/7.html") == 200
    assert get(blog + "/") == 200 and get(docs + "/nothing") == 404
    assert slow_web.peak_in_flight == {DOCS_IP: 1, BLOG_IP: 1}
    counts = page_counts(slow_web.log)
    assert counts == {docs + "/docs/7.html": 1, blog + "/": 1, docs + "/nothing": 1}
    # Two at once on one host are seen as two, by the live count and by the log.
    threads = [threading.Thread(target=get, args=(docs + f"/docs/{k}.html",)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert slow_web.peak_in_flight[DOCS_IP] == 2 and slow_web.peak_in_flight[BLOG_IP] == 1
    report = politeness_report(slow_web.log, 0.0)
    assert report[DOCS_IP].max_in_flight == 2 and report[BLOG_IP].max_in_flight == 1
    assert SHOP_IP not in slow_web.peak_in_flight
