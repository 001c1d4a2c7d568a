"""A crawl whose dedupe index holds SimHashes of other features is never misread:
real workers, a real redis-server, the loopback test web.

An index the previous release created has ``k`` in its ``cfg`` and no ``fv``
(features version 1). A version-2 worker checks it when its spider opens
(DedupeIndex.verify, middlewares/dedupe.py) and refuses to crawl in one line
naming both versions: it closes as when its frontier cannot be opened
(``frontier_unavailable``, exit status 1), fetches no page and adds nothing to
the index, rather than judging pages against fingerprints of other text (or
keeping every page unjudged, one refusal logged per page).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import redis

from crawlproject.dedupe.fingerprint import FEATURES_VERSION
from crawlproject.frontier.store.keys import CrawlKeys
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb, canonical_url

SETTINGS = {
    "CRAWL_HOST_DELAY": 0.02,
    "CRAWL_IDLE_CLOSE_SECONDS": 2,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "CRAWL_ADAPTIVE_DELAY_FACTOR": 0,
    "CRAWL_DEDUPE_STREAK": 0,
    "LOG_LEVEL": "INFO",
}
REFUSAL = (
    f"dedupe index was created with SimHash features version 1, this worker has version "
    f"{FEATURES_VERSION}"
)


def crawl(
    redis_url: str, name: str, web: TestWeb, tmp_path: Path, check: bool = True
) -> tuple[int, list[str], Counter[str], str]:
    out, log = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.log"
    proc = start_worker(
        REPO_ROOT, redis_url, name, web.seeds, SETTINGS, log, extra_args=["-O", str(out)]
    )
    (code,) = wait_all([proc], timeout=180, check=check)
    lines = out.read_text().splitlines() if out.exists() else []
    urls = [canonical_url(str(json.loads(line)["url"])) for line in lines]
    return code, urls, Counter(stats_of(proc.log_path)), log.read_text()


def test_a_worker_of_other_features_is_refused_at_start_in_one_line(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=2, pages=12, links=3, cross_links=0, query_variants=0, body_bytes=6000,
        realistic=True, mirrors={2: 1},
    )  # fmt: skip
    # The mirror answers later than its source: two hosts of one graph crawled in
    # lockstep check each page's two copies at one moment, and of two near copies
    # checked at once the spread index keeps at least one (crawlproject/dedupe/
    # index.py), not exactly one: 9 of 11 judged in one CI run.
    web.latency[web.ips[1]] = 0.3
    keys = CrawlKeys("before", 4)
    with redis.Redis.from_url(redis_url) as client:
        client.hset(keys.dedupe_config, "k", "3")  # as the previous release left it
        code, urls, stats, log = crawl(redis_url, "before", web, tmp_path, check=False)
        # Refused before its first page, in one line: nothing judged, nothing added.
        assert code == 1
        refusals = [line for line in log.splitlines() if REFUSAL in line]
        assert len(refusals) == 1 and "ERROR" in refusals[0], refusals
        assert "Not crawling: " + REFUSAL in refusals[0]
        assert "'finish_reason': 'frontier_unavailable'" in log
        assert urls == []
        assert stats["dedupe/redis_error"] == stats["dedupe/near"] == stats["dedupe/exact"] == 0
        assert client.hgetall(keys.dedupe_config) == {b"k": b"3"}
        assert client.keys(keys.dedupe_prefix + "s:*") == []
        # The same web in a new crawl: the index is version 2 and the mirror's
        # copies are judged near-duplicates of the source's pages.
        _, urls, stats, _ = crawl(redis_url, "after", web, tmp_path)
        after = CrawlKeys("after", 4)
        cfg = client.hgetall(after.dedupe_config)
        assert {f: cfg[f] for f in (b"k", b"fv", b"b")} == {
            b"k": b"3",
            b"fv": str(FEATURES_VERSION).encode(),
            b"b": b"5",  # a new index: the growing layout of 10 tables
        }
    assert stats["dedupe/redis_error"] == 0
    # Of the 12 mirror copies, the 11 within k bits of their source (one is 4 apart).
    assert stats["dedupe/near"] + stats["dedupe/exact"] == 11
    assert len(urls) == len(web.expected_urls) - stats["dedupe/near"] - stats["dedupe/exact"]
