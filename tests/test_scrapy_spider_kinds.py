"""Spiders as Scrapy's documentation writes them (a CrawlSpider, a
SitemapSpider, ``allowed_domains``, a spider whose pages cost CPU) crawl
through the frontier as with Scrapy's own scheduler: every page they reach,
once, by two workers sharing the crawl; each worker ends by itself."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from w3lib.url import canonicalize_url

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb, host_ip
from tests.test_own_spider_crawl import FAST as SETTINGS


def pages_fetched(web: TestWeb) -> Counter[str]:
    """Canonical URL -> fetches (a query variant is fetched as linked)."""
    return Counter(canonicalize_url(r.url) for r in web.log if not r.path.startswith("/robots.txt"))


def crawl(
    redis_url: str, spider: str, argument: str, tmp_path: Path, *more: str
) -> list[dict[str, object]]:
    """Two workers of ``spider`` with ``-a argument`` (and ``-a more``), to
    their end; their items."""
    outs = [tmp_path / f"items{n}.jsonl" for n in range(2)]
    procs = [
        start_worker(
            REPO_ROOT,
            redis_url,
            None,
            [],
            SETTINGS,
            tmp_path / f"w{n}.log",
            extra_args=["-a", argument, *(a for m in more for a in ("-a", m)), "-O", str(outs[n])],
            spider=spider,
        )
        for n in range(2)
    ]
    wait_all(procs, timeout=180)
    for proc in procs:
        stats = stats_of(proc.log_path)
        assert stats.get("frontier/undecodable", 0) == 0, proc.log_path
        assert not any(k.startswith("frontier/unstorable/") for k in stats), stats
        assert "Traceback" not in proc.log_path.read_text()
    return [json.loads(line) for out in outs for line in out.read_text().splitlines()]


def test_a_crawl_spider_with_rules(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=2, pages=12, links=3, cross_links=0)
    items = crawl(redis_url, "rules", "start=" + ",".join(web.seeds), tmp_path)
    pages = pages_fetched(web)
    assert set(pages.values()) == {1}, pages.most_common(3)
    want = {u for u in web.expected_urls if "/p/" in u}
    assert want and {u for u in pages if "/p/" in u} == want
    # One item a page, by its rule; but a page that is an exact copy of one
    # already judged (a query variant: the server ignores the query) has its
    # item dropped by the duplicate filter, counted.
    got = Counter(canonicalize_url(str(i["url"])) for i in items)
    assert set(got.values()) == {1}
    missing = want - set(got)
    assert set(got) <= want and all(
        any(v != u and v.split("?")[0] == u.split("?")[0] for v in want) for u in missing
    ), missing
    dropped = sum(
        int(stats_of(tmp_path / f"w{n}.log").get("dedupe/items_dropped", 0)) for n in range(2)
    )
    assert dropped == len(missing)
    assert {i["rule"] for i in items} == {0}


def test_a_sitemap_spider(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    listed = [f"/p/{k}" for k in range(1, 9)]
    urlset = "".join(f"<url><loc>{{base}}{path}</loc></url>" for path in listed)
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urlset}</urlset>'
    )
    special = {
        h: {"/sitemap.xml": {"body": body, "content_type": "application/xml"}} for h in (1, 2)
    }
    web = testweb_factory(hosts=2, pages=12, links=3, cross_links=0, special=special)
    maps = [web.base_url(h) + "sitemap.xml" for h in (1, 2)]
    items = crawl(redis_url, "sitemap_pages", "maps=" + ",".join(maps), tmp_path)
    pages = pages_fetched(web)
    want = {web.base_url(h).rstrip("/") + path for h in (1, 2) for path in listed}
    assert set(pages) == want | set(maps), sorted(pages)
    assert set(pages.values()) == {1}, pages.most_common(3)
    assert sorted(i["url"] for i in items) == sorted(want)


def test_allowed_domains_keep_the_crawl_on_its_sites(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """Scrapy's OffsiteMiddleware drops what a spider's ``allowed_domains``
    leave out: the other sites are never fetched, the crawl still ends."""
    web = testweb_factory(hosts=3, pages=8, links=3, cross_links=2)
    items = crawl(
        redis_url, "scoped", "start=" + web.base_url(1), tmp_path, "domains=" + host_ip(1)
    )
    pages = pages_fetched(web)
    assert set(pages.values()) == {1}, pages.most_common(3)
    assert pages and all(u.startswith(web.base_url(1)) for u in pages), sorted(pages)
    assert len(items) > 1
    offsite = sum(
        int(stats_of(tmp_path / f"w{n}.log").get("offsite/filtered", 0)) for n in range(2)
    )
    assert offsite > 0  # the other sites' links were there, and dropped


def test_two_workers_of_a_heavy_spider_share_a_few_sites(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """A spider whose pages cost CPU (0.2 s of blocking work each), on 3
    sites: one worker alone is slower than the sites allow, so the crawl is
    shared, not kept by the worker that claimed the hosts first (its own
    claims come late while its loop is busy). Both workers run start(): the
    start URLs are still fetched once (admission.py)."""
    web = testweb_factory(hosts=3, pages=30, links=4, cross_links=0)
    crawl(redis_url, "heavy", "start=" + ",".join(web.seeds), tmp_path, "cost=0.2")
    pages = pages_fetched(web)
    # Each site: its root and 30 pages, each fetched once.
    assert len(pages) == 3 * 31 and set(pages.values()) == {1}, pages.most_common(3)
    counts = [
        int(stats_of(tmp_path / f"w{n}.log").get("response_received_count", 0)) for n in range(2)
    ]
    robots = 3 * 2  # each worker reads each site's robots.txt once at most
    assert sum(counts) <= 3 * 31 + robots
    assert min(counts) >= 3 * 31 // 4, counts
