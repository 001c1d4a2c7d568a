"""URL rules: unit tests of each rule, and a crawl that never queues refused URLs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from scrapy.settings import Settings

from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.rules.url_rules import HostPatterns, ParsedUrl, UrlRules
from testkit.crawlproc import REPO_ROOT, start_worker, stats_of, wait_all
from testkit.testweb import TestWeb, page_counts


def rules(**settings: object) -> UrlRules:
    return UrlRules.from_settings(Settings(settings))


class NoPrintPages:
    """A user's rule, as the module docstring shows."""

    @classmethod
    def from_settings(cls, settings: Settings) -> NoPrintPages:
        return cls()

    def check(self, url: ParsedUrl) -> str | None:
        return "print_page" if "print" in url.query_params else None


def test_defaults_refuse_media_long_urls_and_many_parameters() -> None:
    r = rules()
    assert r.check("http://a.test/page.html") is None
    assert r.check("http://a.test/") is None
    assert r.check("http://a.test/img/logo.PNG") == "extension"
    assert r.check("http://a.test/dl/src.tar.gz") == "extension"
    assert r.check("http://a.test/dl/feed.xml.gz") is None  # sitemaps stay reachable
    assert r.check("http://a.test/" + "x" * 2100) == "url_too_long"
    assert r.check("http://a.test/s?" + "&".join(f"p{i}=1" for i in range(20))) is None
    assert r.check("http://a.test/s?" + "&".join(f"p{i}=1" for i in range(21))) == (
        "too_many_params"
    )


def test_hosts_domains_paths_regexes_and_schemes(tmp_path: Path) -> None:
    blocklist = tmp_path / "blocked.txt"
    blocklist.write_text("# spam farms\n.spam.test\nbad.test\n")
    r = rules(
        CRAWL_ALLOW_HOSTS=[".example.test", "solo.test"],
        CRAWL_DENY_HOSTS=["private.example.test"],
        CRAWL_DENY_HOSTS_FILE=str(blocklist),
        CRAWL_DENY_PATH_PREFIXES=["/admin/", "/cart"],
        CRAWL_DENY_URL_REGEXES=[r"[?&]sort="],
        CRAWL_ALLOWED_SCHEMES=["https"],
    )
    assert r.check("https://example.test/a") is None
    assert r.check("https://www.example.test/a") is None
    assert r.check("https://solo.test/a") is None
    assert r.check("https://sub.solo.test/a") == "host_not_allowed"
    assert r.check("https://other.test/a") == "host_not_allowed"
    assert r.check("https://private.example.test/a") == "host_denied"
    assert r.check("https://x.spam.test/") == "host_denied"
    assert r.check("https://bad.test/") == "host_denied"
    assert r.check("https://example.test/admin/users") == "path_denied"
    assert r.check("https://example.test/cart?id=3") == "path_denied"
    assert r.check("https://example.test/list?sort=asc") == "regex_denied"
    assert r.check("http://example.test/a") == "scheme"
    only = rules(CRAWL_ALLOW_URL_REGEXES=[r"/news/"])
    assert only.check("http://a.test/news/1") is None
    assert only.check("http://a.test/blog/1") == "regex_not_allowed"


def test_host_patterns() -> None:
    p = HostPatterns(["a.test", ".b.test", " ", "# comment"])
    assert p.matches("a.test") and not p.matches("x.a.test")
    assert p.matches("b.test") and p.matches("x.y.b.test") and not p.matches("xb.test")
    assert not HostPatterns([])


def test_user_rules_and_bad_settings() -> None:
    r = rules(CRAWL_URL_RULES=[f"{__name__}.NoPrintPages"])
    assert r.check("http://a.test/p?print=1") == "print_page"
    assert r.check("http://a.test/p?x=1") is None
    with pytest.raises(ConfigError):
        rules(CRAWL_DENY_URL_REGEXES=["("])
    with pytest.raises(ConfigError):
        rules(CRAWL_DENY_HOSTS_FILE="/nonexistent/blocklist.txt")
    with pytest.raises(ConfigError):
        rules(CRAWL_URL_RULES=["builtins.dict"])  # no from_settings
    with pytest.raises(ConfigError):
        rules(CRAWL_MAX_URL_LENGTH=-1)


def test_a_crawl_never_queues_refused_urls(
    redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=3, pages=12, links=3, cross_links=1)
    host3 = web.ips[2]
    settings = {
        "CRAWL_HOST_DELAY": 0.02,
        "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
        "CRAWL_IDLE_POLL_SECONDS": 0.2,
        "CRAWL_DENY_HOSTS": [host3],
        "CRAWL_DENY_PATH_PREFIXES": ["/p/1"],  # /p/1 and /p/10, /p/11
    }
    seeds = web.seeds[:2]  # host 3 is reached only through cross links (scope "any")

    def allowed(url: str) -> bool:
        return host3 not in url and "/p/1" not in url

    proc = start_worker(
        REPO_ROOT, redis_url, "rules", seeds, settings, tmp_path / "w.log",
        extra_args=["-a", "scope=any"],
    )  # fmt: skip
    wait_all([proc], timeout=120)
    fetched = set(page_counts(web.log))
    expected = {u for u in web.reachable_urls(allowed) if not u.startswith(web.base_url(3))}
    assert fetched == expected
    assert not [r for r in web.log if r.host_ip == host3]
    stats = stats_of(proc.log_path)
    assert stats["rules/path_denied"] > 0 and stats["rules/host_denied"] > 0
