"""A spider of one's own on a real redis-server, as a Scrapy user writes it:
its own crawl (named after it), its seeds marked as seeds whatever way they
came, private callbacks and Request subclasses stored, and what cannot be
stored refused before it is marked seen (issue 34, items 1, 2 and 4)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import redis

from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb

FAST = {
    "CRAWL_HOST_DELAY": 0.05,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
}


def fetched(web: TestWeb) -> Counter[str]:
    return Counter(r.url for r in web.log if not r.path.startswith("/robots.txt"))


def test_unstorable_requests_are_refused_before_they_are_seen(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=3, links=1, cross_links=0)
    urls = [web.base_url(1), web.base_url(1) + "p/1"]
    out = tmp_path / "items.jsonl"
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], FAST, tmp_path / "w.log",
        extra_args=["-a", "urls=" + ",".join(urls), "-O", str(out)], spider="unstorable",
    )  # fmt: skip
    wait_all([proc], timeout=90)
    stats = stats_of(proc.log_path)
    # Per URL: a lambda callback, two metas JSON cannot carry, a class made in a function.
    assert stats["frontier/unstorable/callback"] == 2
    assert stats["frontier/unstorable/meta"] == 4
    assert stats["frontier/unstorable/request_class"] == 2
    log = proc.log_path.read_text()
    warnings = [line for line in log.splitlines() if "the frontier cannot store" in line]
    assert len(warnings) == 3 and all("WARNING" in line for line in warnings), warnings
    # The storable request of each URL came after: not seen yet, so crawled, once.
    assert {u: n for u, n in fetched(web).items() if u in urls} == dict.fromkeys(urls, 1)
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(i["url"] for i in items) == sorted(urls)
    assert all(i["n"] == 7 and i["mark"] == [1, "a"] for i in items)


def test_a_tutorial_spider_gets_its_own_crawl_and_its_seeds_are_seeds(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=4, pages=4, links=2, cross_links=0)
    start, argument, listed, found = (web.base_url(i) for i in (1, 2, 3, 4))
    client = redis.Redis.from_url(redis_url)
    client.lpush("tutorial:start_urls", listed)  # crawlproject seed's list, the crawl's name
    out = tmp_path / "items.jsonl"
    proc = start_worker(
        REPO_ROOT, redis_url, None, [argument], FAST, tmp_path / "w.log",
        extra_args=["-a", "start=" + start, "-O", str(out)], spider="tutorial",
    )  # fmt: skip
    wait_all([proc], timeout=120)
    assert "CRAWL_NAME='tutorial' (spider name)" in proc.log_path.read_text()
    # Its own crawl: nothing under web's keys.
    assert list(client.scan_iter(match="cp:{web*")) == []
    keys = CrawlKeys("tutorial", NEW_CRAWL_SHARDS)
    for url in (start, argument, listed):  # start_urls, -a seeds=, the start_urls list
        pkey = url.split("://", 1)[1].rstrip("/")
        assert client.hget(keys.host(keys.shard_of(pkey), pkey), "seed") == b"1", url
    items = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = Counter(i["kind"] for i in items)
    assert {i["url"] for i in items if i["kind"] == "start"} == {start, argument, listed}
    # Private callbacks, cb_kwargs and a Request subclass with a name-mangled callback.
    assert kinds["page"] > 0 and kinds["deep"] > 0
    assert all(i["hop"] == (1 if i["kind"] == "page" else 2) for i in items if "hop" in i)
    counts = fetched(web)
    assert max(counts.values()) == 1, counts.most_common(3)
    assert not any(u.startswith(found) for u in counts)  # no seed, no link: not crawled
    stats = stats_of(proc.log_path)
    assert stats.get("frontier/undecodable", 0) == 0
    assert not any(k.startswith("frontier/unstorable/") for k in stats)


def test_two_spiders_on_one_redis_keep_to_their_own_crawls(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """No crawl name given: ``web`` and a spider of one's own run at once on one
    Redis, each in its own crawl; neither takes the other's requests (whose
    callbacks it does not have)."""
    web = testweb_factory(hosts=2, pages=6, links=2, cross_links=0)
    site_web, site_own = web.base_url(1), web.base_url(2)
    out = tmp_path / "items.jsonl"
    procs = [
        start_worker(REPO_ROOT, redis_url, None, [site_web], FAST, tmp_path / "web.log"),
        start_worker(
            REPO_ROOT, redis_url, None, [], FAST, tmp_path / "tutorial.log",
            extra_args=["-a", "start=" + site_own, "-O", str(out)], spider="tutorial",
        ),
    ]  # fmt: skip
    wait_all(procs, timeout=120)
    client = redis.Redis.from_url(redis_url)
    for crawl in ("web", "tutorial"):
        assert list(client.scan_iter(match=f"cp:{{{crawl}/*", count=1000)), crawl
    for proc in procs:
        stats = stats_of(proc.log_path)
        assert stats.get("frontier/undecodable", 0) == 0 and stats["frontier/claims"] > 0
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert items and all(i["url"].startswith(site_own) for i in items)
    counts = fetched(web)
    assert max(counts.values()) == 1
    assert any(u.startswith(site_web) for u in counts) and any(
        u.startswith(site_own) for u in counts
    )


def test_a_slow_start_and_a_slow_open_do_not_end_the_crawl_early(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    # Each seed comes 2.5 s after the last, and the pipelines take 3 s to open:
    # both longer than the idle close (1.5 s). The crawl is not over while the
    # spider opens nor while its start() is still being read.
    web = testweb_factory(hosts=2, pages=3, links=1, cross_links=0)
    settings = {
        **FAST,
        "ITEM_PIPELINES": {"tests.spiders_for_tests.slow_open.SlowOpenPipeline": 10},
        "TEST_PIPELINE_OPEN_SECONDS": 3.0,
    }
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], settings, tmp_path / "w.log",
        extra_args=["-a", "urls=" + ",".join(web.seeds), "-a", "pause=2.5"], spider="slow_start",
    )  # fmt: skip
    wait_all([proc], timeout=120)
    assert set(fetched(web)) == web.expected_urls
    assert all(n == 1 for n in fetched(web).values())
    assert "Spider closed (finished)" in proc.log_path.read_text()


def test_a_finished_crawl_run_again_fetches_its_start_urls_no_more(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """Scrapy sends start requests dont_filter; the frontier seen-tests a GET
    start request anyway (admission.py): a start URL is fetched once per
    crawl, as the crawl's other seeds, not once per worker or per run."""
    web = testweb_factory(hosts=2, pages=3, links=1, cross_links=0)
    start = ",".join(web.base_url(i) for i in (1, 2))
    for run in range(2):
        proc = start_worker(
            REPO_ROOT, redis_url, None, [], FAST, tmp_path / f"w{run}.log",
            extra_args=["-a", "start=" + start], spider="tutorial",
        )  # fmt: skip
        wait_all([proc], timeout=120)
        if run == 0:
            first = fetched(web)
            assert first[web.base_url(1)] == 1 and first[web.base_url(2)] == 1, first
    assert fetched(web) == first  # the second run fetched nothing, and ended by itself
    assert "finish_reason': 'finished'" in proc.log_path.read_text()


def test_recrawl_tracking_adds_no_field_to_a_spiders_items(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """CRAWL_RECRAWL_TRACK tracks a spider's pages by their responses; its items
    (with a ``url``, as the tracker looks for) keep only the fields it gave."""
    web = testweb_factory(hosts=1, pages=4, links=2, cross_links=0)
    out = tmp_path / "items.jsonl"
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], {**FAST, "CRAWL_RECRAWL_TRACK": True}, tmp_path / "w.log",
        extra_args=["-a", "start=" + web.base_url(1), "-O", str(out)], spider="tutorial",
    )  # fmt: skip
    wait_all([proc], timeout=120)
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert items and all(set(i) <= {"url", "kind", "hop"} for i in items), items[:3]
    stats = stats_of(proc.log_path)
    tracked = sum(v for k, v in stats.items() if k.startswith("recrawl/verdict/"))
    assert tracked >= len(items)  # every page with an item was tracked
