"""A full recrawl of an unchanged site, duplicate checks on, through real
processes (``scrapy crawl web`` workers, ``crawlproject recrawl``, one
redis-server): each page is judged again under its own URL, which is no
duplicate, so its host's duplicate streak does not grow and a URL alias found
later does not set an operator's host aside (docs/duplicates.md, "A page
checked again under its own URL")."""

from __future__ import annotations

import asyncio
import hashlib
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from redis.asyncio import Redis

from crawlproject.dedupe.index import DedupeIndex, DedupeKind
from crawlproject.frontier.basics.urls import UrlCanonicalizer
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb
from tests.test_recrawl import TRACK, Server, page_requests, promoted, recrawl_cli

# Three duplicates of a host in a row park it (the default is 20: fewer pages).
DEDUPE = {"CRAWL_DEDUPE_ENABLED": True, "CRAWL_DEDUPE_STREAK": 3}


def crawl(
    redis_server: Server, name: str, seeds: Sequence[str], tmp_path: Path, tag: str
) -> dict[str, int]:
    proc = start_worker(
        REPO_ROOT, redis_server.url, name, seeds, {**TRACK, **DEDUPE}, tmp_path / f"{tag}.log"
    )
    wait_all([proc], timeout=120)
    return stats_of(proc.log_path)


def fetched(web: TestWeb) -> Counter[str]:
    """Fetches per URL, in canonical form (an alias's query sorted)."""
    canonical = UrlCanonicalizer([]).canonicalize
    return Counter(canonical(r.url) for r in page_requests(web))


def test_a_full_recrawl_of_an_unchanged_site_sets_no_host_aside(
    redis_server: Server, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # No validators: every refetch is a full 200 whose body the index judges
    # again. No query variants: the aliases come at the end.
    web = testweb_factory(hosts=2, pages=4, latency_ms=0, links=2, cross_links=1,
                          query_variants=0, validators=False)  # fmt: skip
    name = "again"
    urls = len(web.expected_urls)
    stats = crawl(redis_server, name, web.seeds, tmp_path, "c0")
    assert fetched(web) == Counter(web.expected_urls)
    assert stats["dedupe/checked/new"] == urls
    # Two full recrawls: each page judged twice more under its own URL.
    for cycle in (1, 2):
        web.log.clear()
        assert promoted(recrawl_cli(redis_server, name, "--all", wait=False)) == urls
        # Then, in the second, a URL alias of each host: a real duplicate, its
        # host's first in a row (not its ninth, as when the rechecks counted).
        aliases = [web.base_url(h) + "p/1?alias=1" for h in (1, 2)] if cycle == 2 else []
        stats = crawl(redis_server, name, [*web.seeds, *aliases], tmp_path, f"c{cycle}")
        assert fetched(web) == Counter([*web.expected_urls, *aliases])  # none set aside
        assert {r.status for r in page_requests(web)} == {200}
        assert stats["dedupe/same_url_again"] == urls
        assert stats.get("dedupe/checked/exact", 0) == len(aliases)
        assert stats.get("dedupe/streak_hosts", 0) == 0
        assert stats.get("dedupe/streak_parked_urls", 0) == 0


def test_a_page_whose_judge_died_before_naming_its_body_is_crawled_with_its_links(
    redis_server: Server, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """A worker killed between the duplicate index's exact check (the body
    stored) and the record of the page's URL leaves a body no URL names; the
    page's lease brings the URL back. The seed is the only way into its site:
    judged an exact copy of nothing, its links would be dropped and the site
    never crawled. Kept as new, the whole site is crawled."""
    web = testweb_factory(hosts=1, pages=6, latency_ms=0, links=2, cross_links=0,
                          query_variants=0, validators=False)  # fmt: skip
    name = "orphan"
    seed = web.seeds[0]
    with urllib.request.urlopen(seed, timeout=10) as answer:
        body = answer.read()
    web.log.clear()

    async def store_body_only() -> None:
        # The dead worker's state: the seed's body in the index, no URL
        # recorded for it (an index that records no originals writes exactly that).
        redis = Redis.from_url(redis_server.url)
        try:
            index = DedupeIndex(redis, CrawlKeys(name, 32), record_originals=False)
            verdict = await index.check_and_add(hashlib.sha1(body).digest(), None, seed, "")
            assert verdict.kind is DedupeKind.NEW
        finally:
            await redis.aclose()

    asyncio.run(store_body_only())
    stats = crawl(redis_server, name, web.seeds, tmp_path, "c0")
    assert fetched(web) == Counter(web.expected_urls)
    assert stats["dedupe/unrecorded_original"] == 1
