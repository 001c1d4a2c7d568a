"""Spider options and the downloader's redirects and retries, through real crawls."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.processes import free_port
from testkit.redis_server import RedisServer
from testkit.testweb import OUT_OF_SCOPE_IP, TestWeb, page_counts, politeness_report

DELAY = 0.2
FAST = {"CRAWL_HOST_DELAY": DELAY, "CRAWL_IDLE_CLOSE_SECONDS": 1.5, "CRAWL_IDLE_POLL_SECONDS": 0.2}


def crawl(
    redis: RedisServer, name: str, seeds: list[str], tmp_path: Path, *args: str, **settings: object
) -> tuple[dict[str, int], list[dict[str, object]]]:
    out = tmp_path / f"{name}.jsonl"
    proc = start_worker(
        REPO_ROOT, redis.url, name, seeds, {**FAST, **settings}, tmp_path / f"{name}.log",
        extra_args=[*args, "-O", str(out)],
    )  # fmt: skip
    wait_all([proc], timeout=120)
    items = [json.loads(line) for line in out.read_text().splitlines()]
    return stats_of(proc.log_path), items


def test_redirects_and_retries_hand_the_url_on(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=2, pages=5, latency_ms=(5, 10), links=2, cross_links=0)
    h1 = web.base_url(1)
    seeds = [h1 + "go/2", h1 + "flaky/2/3", web.base_url(2)]
    stats, items = crawl(redis_server, "redir", seeds, tmp_path)
    counts = page_counts(web.log)
    # The fetch record keeps the URL as requested and where the body came from.
    by_url = {i["url"]: i for i in items}
    assert by_url[h1 + "go/2"]["final_url"] == web.base_url(1) + web.path_of(2).lstrip("/")
    assert by_url[h1 + "go/2"]["status"] == 200
    direct = [i for u, i in by_url.items() if "/go/" not in u and "/flaky/" not in u]
    assert direct and all(i["final_url"] == i["url"] for i in direct)
    assert counts[h1 + "flaky/2/3"] == 3  # 503, 503, then a redirect
    assert counts[h1 + "go/2"] == 1
    pages = {u: n for u, n in counts.items() if "/go/" not in u and "/flaky/" not in u}
    assert set(pages) == web.expected_urls
    assert all(n == 1 for n in pages.values()), pages
    # 2 redirects + 2 retries: each new request took the URL's lease over.
    assert stats["frontier/continuations"] == 4
    assert stats["retry/count"] == 2
    # Each host's first claim fetched robots.txt and gave its URL back.
    assert stats["frontier/deferred"] == 2
    assert stats["frontier/acks"] + stats["frontier/deferred"] == stats["frontier/claims"]
    for host, p in politeness_report(web.log, DELAY).items():
        assert p.max_in_flight <= 1 and p.idle_below_delay == 0, (host, p)


def test_max_depth_max_pages_and_scope_any(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=1, pages=20, latency_ms=0, links=3, cross_links=0, links_out_of_scope=1
    )
    _, items = crawl(redis_server, "depth", web.seeds, tmp_path, "-a", "max_depth=1")
    assert max(int(str(i["depth"])) for i in items) == 1
    assert 1 < len(items) < len(web.expected_urls)

    before = sum(page_counts(web.log).values())
    stats, items = crawl(redis_server, "pages", web.seeds, tmp_path, "-a", "max_pages=5")
    # One slot: at most one more in flight.
    assert 5 <= sum(page_counts(web.log).values()) - before <= 6
    assert stats["frontier/outcome/scraped"] >= 5

    assert not [r for r in web.log if r.host_ip == OUT_OF_SCOPE_IP]
    crawl(redis_server, "any", web.seeds, tmp_path, "-a", "scope=any", "-a", "max_depth=1")
    assert [r for r in web.log if r.host_ip == OUT_OF_SCOPE_IP]


def test_bad_arguments_fail_clearly(redis_server: RedisServer, tmp_path: Path) -> None:
    proc = start_worker(
        REPO_ROOT, redis_server.url, "bad", ["http://127.0.3.1:9/"], FAST, tmp_path / "bad.log",
        extra_args=["-a", "scope=planet"],
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) != [0]
    assert "scope must be one of hosts, domains, any" in proc.log_path.read_text()
    proc = start_worker(
        REPO_ROOT, redis_server.url, "bad2", ["http://127.0.3.1:9/"],
        {**FAST, "DOWNLOAD_DELAY": 1}, tmp_path / "bad2.log",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) != [0]
    # -s DOWNLOAD_DELAY is taken as CRAWL_HOST_DELAY, which FAST sets to another value.
    assert (
        "Not started: DOWNLOAD_DELAY (1.0) is taken as CRAWL_HOST_DELAY"
        in proc.log_path.read_text()
    )


def test_unreachable_or_mismatched_frontier_closes_clearly(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    seeds = ["http://127.0.3.1:9/"]
    proc = start_worker(
        REPO_ROOT, "redis://user:s3cret@127.0.0.1:1/0", "gone", seeds, FAST, tmp_path / "gone.log"
    )
    # Exit status 1 (Scrapy's own would be 0): a supervisor sees the failure.
    assert wait_all([proc], timeout=60, check=False) == [1]
    text = proc.log_path.read_text()
    assert "Cannot open the frontier (ConnectionError at redis://user:***@127.0.0.1:1/0)" in text
    assert "Spider closed (frontier_unavailable)" in text
    assert "s3cret" not in text  # no credential in the log
    assert "Traceback" not in text
    # The operator's commands say the same in one line, exit status 1.
    for command in (["status"], ["recrawl", "--status"], ["counts"]):
        cli = subprocess.run(
            [sys.executable, "-m", "crawlproject", "--redis-url",
             "redis://user:s3cret@127.0.0.1:1/0", *command],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cli.returncode == 1, (command, cli.stderr)
        assert cli.stderr.startswith(
            "crawlproject: cannot use Redis at redis://user:***@127.0.0.1:1/0: Error 111"
        ), (command, cli.stderr)
        assert len(cli.stderr.splitlines()) == 1, (command, cli.stderr)

    # Nothing listens on port 9: robots.txt is unreachable, and with no
    # deferral its one URL fails at once, so the crawl ends.
    crawl(
        redis_server,
        "fixed",
        seeds,
        tmp_path,
        CRAWL_FRONTIER_SHARDS=4,
        CRAWL_ROBOTS_DEFER_RETRIES=0,
    )
    proc = start_worker(
        REPO_ROOT, redis_server.url, "fixed", seeds, {**FAST, "CRAWL_FRONTIER_SHARDS": 2},
        tmp_path / "mismatch.log",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) == [1]
    text = proc.log_path.read_text()
    assert "was created with CRAWL_FRONTIER_SHARDS=4; this worker sets 2" in text
    assert "Spider closed (frontier_unavailable)" in text


GONE = "<html><body>This page is gone.</body></html>"


def test_failed_fetches_get_a_fetch_record(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(
        hosts=1, pages=3, latency_ms=0, links=2, cross_links=0, query_variants=0,
        special={1: {"/gone": {"status": 404, "body": GONE, "content_type": "text/html"}}},
    )  # fmt: skip
    gone = web.base_url(1) + "gone"
    refused = f"http://127.0.0.1:{free_port()}/x"  # nothing listens there
    stats, items = crawl(
        redis_server, "failures", [*web.seeds, gone, refused], tmp_path, RETRY_TIMES=0,
        CRAWL_ROBOTS_OBEY=False,  # an unreachable robots.txt would forbid the host
    )  # fmt: skip
    by_url = {i["url"]: i for i in items}
    assert set(by_url) == web.expected_urls | {gone, refused}
    assert by_url[gone].pop("fetched_at") and by_url[refused]["fetched_at"]
    # The 404's answer is stored (docs/storage.md): its record says where.
    assert by_url[gone].pop("payload_digest") and by_url[gone].pop("warc_file")
    assert by_url[gone].pop("warc_offset") >= 0 and by_url[gone].pop("warc_length") > 0
    assert by_url[gone] == {
        "url": gone, "final_url": gone, "status": 404, "depth": 0, "length": len(GONE),
        "content_type": "text/html", "error": "HttpError",
    }  # fmt: skip
    assert by_url[refused]["status"] is None
    assert by_url[refused]["error"] == "DownloadConnectionRefusedError"
    assert all(by_url[u]["status"] == 200 and "error" not in by_url[u] for u in web.expected_urls)
    # The 404 page is recorded and stored, not judged as a page.
    assert stats["dedupe/checked/new"] == len(web.expected_urls)
    assert stats["store/pages"] == len(web.expected_urls) + 1
    assert stats["web/error/HttpError"] == 1
