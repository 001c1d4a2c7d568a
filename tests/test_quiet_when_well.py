"""Quiet when all is well: a clean crawl of a clean site logs no WARNING.

``scrapy crawl web`` on the embedded default (no REDIS_URL) against a loopback
site that answers every page and its robots.txt: every line at WARNING or
above is a false alarm a user learns to ignore, so there must be none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb

ROBOTS = {"/robots.txt": {"body": "User-agent: *\nAllow: /\n"}}
LOUD = re.compile(r"^\S+ \S+ \[[^\]]+\] (WARNING|ERROR|CRITICAL): ")


def test_a_clean_crawl_of_a_clean_site_logs_no_warning(
    testweb_factory: Callable[..., TestWeb], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    web = testweb_factory(
        hosts=2, pages=6, latency_ms=0, links=2, cross_links=1, query_variants=0,
        special={1: ROBOTS, 2: ROBOTS},
    )  # fmt: skip
    settings = {
        "CRAWL_HOST_DELAY": 0.1, "CRAWL_IDLE_CLOSE_SECONDS": 1, "CRAWL_IDLE_POLL_SECONDS": 0.1,
        "CRAWL_DATA_DIR": str(tmp_path / "data"),
    }  # fmt: skip
    # No REDIS_URL anywhere: the embedded Redis, as a new user runs it.
    for name in os.environ:
        if name.startswith(("REDIS_", "CRAWL_")):
            monkeypatch.delenv(name)
    proc = start_worker(REPO_ROOT, None, None, web.seeds, settings, tmp_path / "web.log")
    assert wait_all([proc], timeout=180) == [0]
    stats = stats_of(proc.log_path)
    assert stats.get("response_received_count", 0) >= web.hosts * 6  # pages and robots.txt
    text = proc.log_path.read_text(errors="replace")
    loud = [line for line in text.splitlines() if LOUD.match(line)]
    assert loud == [], "lines at WARNING or above on a clean crawl:\n" + "\n".join(loud)
