"""Spider-trap guards (crawlproject/rules/traps.py): pure unit tests."""

from __future__ import annotations

import logging
import time

import pytest
from scrapy.settings import Settings

from crawlproject.frontier.basics.urls import UrlCanonicalizer
from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.rules.traps import (
    OncePerKey,
    PathRepeatsRule,
    repeated_path_segments,
    url_pattern,
    url_shape,
)
from crawlproject.rules.url_rules import ParsedUrl, UrlRules

TRAPS = [
    "/x/x/x/x",
    "/x/x/x/x/",
    "/x/x/x/x/page.html",
    "/x//x//x//x",  # empty segments are ignored
    "/a/b/a/b/a/b/a/b/",
    "/pre/a/b/a/b/a/b/a/b/post.html",
    "/a/b/c/a/b/c/a/b/c/a/b/c/",
    "/site/css/css/css/css/style",
    "/a/1/a/2/a/3/a/4/a/",  # one segment 5 times, not back to back
    "/news/about/sport/news/about/sport/about/news/sport/about/news/about/",
]
NOT_TRAPS = [
    "",
    "/",
    "/x",
    "/x/x/",
    "/x/x/x/",
    "/x/x/x/x.html",  # the file is not the directory
    "/a/b/a/b/a/b/page.html",
    "/a/b/c/a/b/c/a/b/c/",
    "/2024/01/01/news/",
    "/2011/11/11/11-11-11.html",
    "/a/b/c/a/",
    "/a/b/c/a/b/c/",
    "/tiles/0/0/0/0.png",
    "/a/1/a/2/a/3/a/4/",
    "/a/b/c/d/a/b/c/d/a/b/c/d/a/b/c/d/",  # no blocks of 4; a is there 4 times
    "/X/x/X/x/X/x/X/",  # case-sensitive, as paths are
]


@pytest.mark.parametrize("path", TRAPS)
def test_repeating_paths_are_traps(path: str) -> None:
    assert repeated_path_segments(path, 2)


@pytest.mark.parametrize("path", NOT_TRAPS)
def test_ordinary_paths_are_not(path: str) -> None:
    assert not repeated_path_segments(path, 2)


def test_max_repeats_is_how_often_a_block_may_follow_itself() -> None:
    assert not repeated_path_segments("/x/x/", 1)
    assert repeated_path_segments("/x/x/x/", 1)
    assert not repeated_path_segments("/a/b/a/b/", 1)
    assert repeated_path_segments("/a/b/a/b/a/b/", 1)
    # Anywhere in the path: at most max_repeats + 2 times.
    assert not repeated_path_segments("/a/1/a/2/a/", 1)
    assert repeated_path_segments("/a/1/a/2/a/3/a/", 1)
    assert not repeated_path_segments("/x/x/x/x/", 3)
    assert repeated_path_segments("/x/x/x/x/x/", 3)
    with pytest.raises(ValueError):
        repeated_path_segments("/x/", 0)


def test_long_paths_are_checked_in_linear_time() -> None:
    distinct = "/" + "/".join(f"s{i}" for i in range(50_000))
    periodic = "/" + "/".join("abcd"[i % 4] for i in range(50_000))  # blocks of 4
    start = time.perf_counter()
    assert not repeated_path_segments(distinct, 2)
    assert repeated_path_segments(periodic, 2)  # caught by the whole-path count
    assert repeated_path_segments("/a" * 50_000 + "/b", 2)
    assert time.perf_counter() - start < 1.0


def test_patterns_ignore_values_and_digits_not_names() -> None:
    key = url_pattern("http://h.test/s?a=1&b=2")
    assert key is not None and len(key) == 8
    assert url_pattern("http://h.test/s?a=3&b=4") == key
    assert url_pattern("http://h.test/s?b=x&a=") == key  # order and values do not matter
    assert url_pattern("http://h.test/s?a=1&a=2&b=2") == key  # repeated names count once
    assert url_pattern("https://other.test:8080/s?a=9&b=9") == key  # no scheme, no host
    assert url_pattern("http://h.test/s?a=1&c=2") != key
    assert url_pattern("http://h.test/s?a=1") != key
    assert url_pattern("http://h.test/t?a=1&b=2") != key
    assert url_pattern("http://h.test/s") is None
    assert url_pattern("http://h.test/") is None
    assert url_shape("http://h.test/s?b=2&a=1") == "/s?a&b"


def test_calendars_share_one_pattern() -> None:
    months = [f"http://h.test/events?month={y}-{m:02}" for y in (2026, 2027) for m in range(1, 13)]
    assert len({url_pattern(u) for u in months}) == 1
    paths = ["http://h.test/cal/2026/11?view=day", "http://h.test/cal/2027/01?view=day"]
    assert url_pattern(paths[0]) == url_pattern(paths[1])
    assert url_shape(paths[0]) == "/cal/0/0?view"
    assert url_pattern("http://h.test/cal/2026/11?view=week") == url_pattern(paths[0])
    assert url_pattern("http://h.test/cal/v2/11?view=day") != url_pattern(paths[0])  # v0 != 0
    assert url_pattern("http://h.test/cal/2026/11/?view=day") != url_pattern(paths[0])


def test_session_ids_share_one_pattern() -> None:
    canon = UrlCanonicalizer(["sid"])
    sessions = [
        canon.canonicalize(f"http://h.test/list.php?page=2&s={token}&sid={token}")
        for token in ("8f3a9c", "b0b0b0b0", "zzz")
    ]
    assert all("sid=" not in u for u in sessions)  # known names the canonicalizer drops
    assert len({url_pattern(u) for u in sessions}) == 1
    assert url_shape(sessions[0]) == "/list.php?page&s"


def test_once_per_key_is_bounded_lru() -> None:
    once = OncePerKey(2)
    assert once.first("a") and once.first("b")
    assert not once.first("a")  # seen, and now the most recent
    assert once.first("c")  # evicts b, the least recent
    assert not once.first("a") and not once.first("c")
    assert once.first("b")
    assert len(once) == 2
    with pytest.raises(ValueError):
        OncePerKey(0)


def test_path_repeats_rule_in_url_rules(caplog: pytest.LogCaptureFixture) -> None:
    rules = UrlRules.from_settings(Settings())
    trap = "http://a.test/x/y/x/y/x/y/x/y/"
    with caplog.at_level(logging.INFO, logger="crawlproject.rules.traps"):
        assert rules.check(trap) == "path_repeats"
        assert rules.check(trap + "x/y/") == "path_repeats"
        assert rules.check("http://b.test/x/x/x/x") == "path_repeats"
    assert rules.check("http://a.test/x/y/x/y/") is None
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2  # once per host
    assert logged[0].startswith("a.test: ") and trap in logged[0]
    assert logged[1].startswith("b.test: ")

    assert UrlRules.from_settings(Settings({"CRAWL_MAX_PATH_REPEATS": 0})).check(trap) is None
    looser = UrlRules.from_settings(Settings({"CRAWL_MAX_PATH_REPEATS": "3"}))
    assert looser.check(trap) is None
    assert looser.check(trap + "x/y/") == "path_repeats"
    with pytest.raises(ConfigError):
        UrlRules.from_settings(Settings({"CRAWL_MAX_PATH_REPEATS": -1}))
    rule = PathRepeatsRule(2)
    assert rule.check(ParsedUrl.parse("http://c.test/a/a/a/a?q=1")) == "path_repeats"
    assert rule.check(ParsedUrl.parse("http://c.test/a?q=a/a/a/a/a")) is None  # paths only
    with pytest.raises(ValueError):
        PathRepeatsRule(0)
