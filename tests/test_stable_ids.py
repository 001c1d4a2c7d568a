"""A long listing of stable-id articles is crawled whole; chains that bring
nothing new still stop (issue 34, items 5 and 6).

Two real workers on a real redis-server, default settings (only the delays
shortened, on loopback), crawl two seeded hosts of testkit/blog.py:

* a blog of 900 articles with stable ids (32 hex digits, uuids, 22 base62
  characters in turn), each linked ONCE, from one of 45 listing pages on a
  prev/next chain: every listing and every article is fetched exactly once
  (neither the depth guard, 20 hops, nor the token guard, 100 URLs of a shape,
  cuts them);
* a site of 200 pages on one chain (each new content), each linking a cache
  buster ``/about?v=<token minted per render>`` whose pages are copies of one
  page: every page of the chain fetched once, the cache buster's token shape
  contained (its pages are duplicates) within CRAWL_TRAP_TOKEN_URLS fetches;
* a host whose ``/`` leads into an empty archive (thin pages) and a calendar
  (near-duplicate months), endless in both directions: each stays within
  2 x CRAWL_MAX_DEPTH + 1 fetches, and the empty archive was cut by the depth
  guard (``trap/max_depth``).

Why these sizes are enough (the blog was 2,010 articles and the chain 300
pages: 118 s in a CI run, 78 s alone). What the blog shows is that neither
guard cuts stable ids: each of its three id shapes has 300 new URLs, three
times the token guard's 100 (before issue 34 the guard contained the shapes
and 1,865 of 2,010 articles were missed), and its listing chain is 45
hops, deeper than the 2 x 20 + 1 an empty chain is allowed (asserted below),
so a depth guard that cut it would show. The buster's chain of 200 pages
mints 200 tokens, twice the 100 the guard may let through: uncontained, its
``/about`` fetches would exceed the bound asserted.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from crawlproject.frontier.basics.urls import host_key
from testkit.blog import BlogWeb
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import page_counts, politeness_report

BLOG, ARCHIVE, BUSTER = 1, 2, 3
ARTICLES = 900  # 45 listing pages of 20: 300 articles of each id shape
BUSTER_PAGES = 200  # twice TOKEN_URLS
MAX_DEPTH = 20  # CRAWL_MAX_DEPTH's default
TOKEN_URLS = 100  # CRAWL_TRAP_TOKEN_URLS's default
FAST = {"CRAWL_HOST_DELAY": 0, "CRAWL_IDLE_CLOSE_SECONDS": 2, "CRAWL_IDLE_POLL_SECONDS": 0.2}


def test_a_blog_of_stable_ids_is_crawled_whole_and_empty_chains_stop(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    web = BlogWeb(
        hosts=3, blogs=[BLOG], archives=[ARCHIVE], busters=[BUSTER], articles=ARTICLES,
        buster_pages=BUSTER_PAGES, latency_ms=0,
    )  # fmt: skip
    web.start()
    try:
        assert web.listings > 2 * MAX_DEPTH + 1  # deeper than an empty chain may go
        assert ARTICLES // 3 >= 3 * TOKEN_URLS  # each shape: 3 x the token guard's count
        assert BUSTER_PAGES >= 2 * TOKEN_URLS  # uncontained, the buster would pass the bound
        seeds = [web.base_url(h) for h in (BLOG, ARCHIVE, BUSTER)]
        procs = [
            start_worker(REPO_ROOT, redis_server.url, "blog", seeds, FAST, tmp_path / f"w{i}.log")
            for i in range(2)
        ]
        wait_all(procs, timeout=600)  # each exits 0 by itself: the crawl ended
    finally:
        web.stop()
    stats: Counter[str] = Counter()
    for p in procs:
        stats.update(stats_of(p.log_path))
    counts = page_counts(web.log)

    blog = host_key(web.base_url(BLOG))
    expected = web.blog_urls(BLOG)
    assert len(expected) == 1 + web.listings + ARTICLES
    fetched = {u: n for u, n in counts.items() if host_key(u) == blog}
    missed = expected - set(fetched)
    assert not missed, (len(missed), sorted(missed)[:5], stats)
    assert set(fetched) == expected and set(fetched.values()) == {1}  # each exactly once
    assert stats["trap/token_pages"] >= ARTICLES  # the token guard saw their pages...

    buster = host_key(web.base_url(BUSTER))
    pages = {u: n for u, n in counts.items() if host_key(u) == buster and "/about" not in u}
    assert set(pages) == web.buster_urls(BUSTER) and set(pages.values()) == {1}
    about = sum(n for u, n in counts.items() if host_key(u) == buster and "/about" in u)
    assert 2 < about <= TOKEN_URLS, about
    # One shape contained (the cache buster's), none of the blog's: its URLs parked.
    assert stats["trap/token_shapes"] == 1 and stats["trap/token_parked"] > 0, stats

    chains = web.chain_fetches(web.log, ARCHIVE)
    assert 0 < chains["archive"] <= 2 * MAX_DEPTH + 1, chains
    assert 0 < chains["calendar"] <= 2 * MAX_DEPTH + 1, chains
    assert stats["trap/max_depth"] > 0 and stats["dedupe/stale_pages"] > 0, stats

    for host, polite in politeness_report(web.log, 0).items():
        assert polite.max_in_flight <= 1, (host, polite)
