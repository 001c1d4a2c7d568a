"""Settings read as their users mean them (pure parsing, no Redis): the Redis URL
from REDIS_URL / scrapy-redis's REDIS_HOST... / the environment, scrapy-redis
settings honoured or refused, CRAWL_HOST_OVERRIDES keys, host patterns, and
Scrapy's ROBOTSTXT_USER_AGENT / DNSCACHE_SIZE."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy.settings import Settings

from crawlproject.dns.resolver import DnsConfig
from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.crawl.host_overrides import OverrideKeyError, politeness_keys
from crawlproject.frontier.crawl.redis_settings import redis_target, refuse_scrapy_redis
from crawlproject.robots.config import RobotsConfig
from crawlproject.rules.url_rules import HostPatterns, UrlRules

REPO_ROOT = Path(__file__).resolve().parents[1]


def project(environ: dict[str, str] | None = None, **cmdline: object) -> Settings:
    """The project settings as a worker has them: the settings module (with
    the environment copied in by it: here the values of ``environ``) and -s."""
    settings = Settings()
    settings.setmodule("crawlproject.settings")
    for name, value in (environ or {}).items():
        settings.set(name, value, priority="project")  # what settings.py does
    settings.update(cmdline, priority="cmdline")
    return settings


def target(environ: dict[str, str] | None = None, **cmdline: object) -> tuple[str | None, str]:
    t = redis_target(project(environ, **cmdline), environ or {})
    return t.url, t.source


def test_redis_url_sources_in_order() -> None:
    assert target() == (None, "")  # the embedded Redis
    env = {"REDIS_URL": "redis://fleet:6379/0"}
    assert target(env) == ("redis://fleet:6379/0", "the REDIS_URL environment variable")
    # A setting wins over the environment: REDIS_URL, or scrapy-redis's REDIS_HOST.
    assert target(env, REDIS_URL="redis://mine:1/2") == (
        "redis://mine:1/2",
        "the REDIS_URL setting",
    )
    assert target(env, REDIS_HOST="10.0.0.5") == (
        "redis://10.0.0.5:6379",
        "REDIS_HOST/REDIS_PORT/REDIS_PARAMS",
    )
    # scrapy-redis's defaults: localhost, 6379.
    assert target(REDIS_PORT="6380")[0] == "redis://localhost:6380"
    assert target(REDIS_HOST="::1", REDIS_PORT=7000, REDIS_DB=3)[0] == "redis://[::1]:7000/3"


def test_redis_params_build_and_complete_the_url() -> None:
    params = {
        "password": "p@ss:w/rd", "db": 2, "ssl": True, "ssl_ca_certs": "/etc/ca.crt",
        "socket_timeout": 30, "retry_on_timeout": True, "encoding": "utf-8",
    }  # fmt: skip
    url, _ = target(REDIS_HOST="r.internal", REDIS_PORT=6380, REDIS_PARAMS=json.dumps(params))
    assert url == (
        "rediss://:p%40ss%3Aw%2Frd@r.internal:6380/2?retry_on_timeout=true"
        "&socket_timeout=30&ssl_ca_certs=%2Fetc%2Fca.crt"
    )
    # redis-py reads it back as scrapy-redis would have passed the params.
    from redis.asyncio.connection import parse_url

    parsed = parse_url(url)
    assert parsed["password"] == "p@ss:w/rd" and parsed["db"] == 2
    assert parsed["socket_timeout"] == 30.0 and parsed["ssl_ca_certs"] == "/etc/ca.crt"
    # REDIS_PARAMS completes a REDIS_URL; the URL's own values win.
    env = {"REDIS_URL": "redis://u:own@fleet:6379/5"}
    url, source = target(env, REDIS_PARAMS={"password": "other", "db": 1, "socket_timeout": 9})
    assert (url, source) == (
        "redis://u:own@fleet:6379/5?socket_timeout=9",
        "the REDIS_URL environment variable",
    )
    url, _ = target(REDIS_URL="redis+cluster://n1:7000", REDIS_PARAMS={"ssl": True})
    assert url == "rediss+cluster://n1:7000"


@pytest.mark.parametrize(
    ("cmdline", "message"),
    [
        ({"REDIS_PARAMS": {"redis_cls": "x.Y"}}, "REDIS_PARAMS['redis_cls']"),
        ({"REDIS_PARAMS": {"decode_responses": True}}, "decode_responses"),
        ({"REDIS_PARAMS": {"client_name": "x"}}, "'client_name' cannot apply"),
        ({"REDIS_ENCODING": "latin-1"}, "stores URLs as UTF-8"),
        ({"REDIS_HOST": "h", "REDIS_PORT": "http"}, "REDIS_PORT 'http' is not a port"),
    ],
)
def test_redis_params_that_cannot_apply(cmdline: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        redis_target(project(**cmdline), {})


def test_environment_read_by_the_settings_module(tmp_path: Path) -> None:
    """A real process: settings.py copies REDIS_URL, CRAWL_NAME, CRAWL_DATA_DIR
    from the environment, and an -s setting (cmdline priority) wins."""
    code = (
        "import json, sys\n"
        "from scrapy.utils.project import get_project_settings\n"
        "from crawlproject.frontier.crawl.config import FrontierConfig\n"
        "from crawlproject.frontier.crawl.crawl_name import crawl_name\n"
        "s = get_project_settings()\n"
        "for pair in sys.argv[1:]:\n"
        "    s.set(*pair.split('=', 1), priority='cmdline')\n"
        "c = FrontierConfig.from_settings(s)\n"
        "print(json.dumps([c.redis_url, c.redis_source, crawl_name(None, s), c.data_dir]))\n"
    )
    env = {
        **os.environ, "REDIS_URL": "redis://fleet:6379/1", "CRAWL_NAME": "envcrawl",
        "CRAWL_DATA_DIR": str(tmp_path),
    }  # fmt: skip

    def run(*pairs: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", code, *pairs], cwd=REPO_ROOT, env=env, check=True,
            capture_output=True, text=True,
        ).stdout  # fmt: skip
        return list(json.loads(out))

    assert run() == [
        "redis://fleet:6379/1", "the REDIS_URL environment variable", "envcrawl", str(tmp_path)
    ]  # fmt: skip
    assert run("REDIS_URL=redis://cli:1/0", "CRAWL_NAME=cli") == [
        "redis://cli:1/0", "the REDIS_URL setting", "cli", str(tmp_path)
    ]  # fmt: skip


def test_start_urls_key_and_persist() -> None:
    config = FrontierConfig.from_settings(project())
    assert config.crawl_keys("web").start_urls == "web:start_urls" and config.persist
    config = FrontierConfig.from_settings(
        project(REDIS_START_URLS_KEY="seeds:%(name)s", SCHEDULER_PERSIST="False")
    )
    assert config.crawl_keys("news").start_urls == "seeds:news" and not config.persist
    with pytest.raises(ConfigError, match="only %\\(name\\)s"):
        FrontierConfig.from_settings(project(REDIS_START_URLS_KEY="%(spider)s:start_urls"))


@pytest.mark.parametrize(
    ("cmdline", "message"),
    [
        ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler"}, "remove SCHEDULER"),
        ({"DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter"}, "seen set"),
        ({"SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue"}, "CRAWL_PRIORITY_POLICY"),
        ({"SCHEDULER_QUEUE_KEY": "%(spider)s:q"}, "CRAWL_NAME"),
        ({"SCHEDULER_DUPEFILTER_CLASS": "x.Y"}, "seen-URL test"),
        ({"SCHEDULER_SERIALIZER": "json"}, "CRAWL_REQUEST_CLASSES"),
        ({"SCHEDULER_IDLE_BEFORE_CLOSE": 10}, "CRAWL_IDLE_CLOSE_SECONDS"),
        ({"REDIS_START_URLS_AS_SET": "True"}, "LIST"),
        ({"REDIS_START_URLS_AS_ZSET": True}, "LIST"),
    ],
)
def test_scrapy_redis_settings_that_cannot_apply(cmdline: dict[str, object], message: str) -> None:
    settings = project(**cmdline)
    with pytest.raises(ConfigError, match=message) as raised:
        refuse_scrapy_redis(settings)
    name = next(iter(cmdline))
    assert str(raised.value).startswith(f"{name}=") and "\n" not in str(raised.value)


def test_harmless_scrapy_redis_values_pass() -> None:
    refuse_scrapy_redis(
        project(
            SCHEDULER_FLUSH_ON_START=False, REDIS_START_URLS_AS_SET="False",
            SCHEDULER_IDLE_BEFORE_CLOSE=0, REDIS_ENCODING="utf-8", SCHEDULER_PERSIST=True,
        )
    )  # fmt: skip


def test_host_override_keys() -> None:
    # The server: one key for http and https of a host (ports 80 and 443 are
    # the host itself), another port another server.
    assert politeness_keys("example.com", "host") == ["example.com"]
    assert politeness_keys("Example.COM.", "host") == ["example.com."]
    assert politeness_keys("example.com:8080", "host") == ["example.com:8080"]
    assert politeness_keys("https://example.com", "host") == ["example.com"]
    assert politeness_keys("https://Example.com:443/", "host") == ["example.com"]
    assert politeness_keys("http://example.com:443", "address") == ["example.com"]
    assert politeness_keys("http://[::1]:8080", "host") == ["[::1]:8080"]
    assert politeness_keys("http://bücher.de", "host") == ["xn--bcher-kva.de"]
    assert politeness_keys("example.co.uk", "domain") == ["example.co.uk"]
    for bad, politeness in [
        ("https://example.com/path", "host"),
        ("*.example.com", "host"),
        ("ftp://example.com", "host"),
        ("user@example.com", "host"),
        ("", "host"),
        ("www.example.com", "domain"),
        ("https://example.com", "domain"),
        ("example.com:8080", "domain"),
    ]:
        with pytest.raises(OverrideKeyError):
            politeness_keys(bad, politeness)


def test_host_overrides_in_the_config() -> None:
    overrides = {
        "example.com": {"delay": 5},
        "https://example.com": {"delay": 2, "concurrency": 2},
        "other.test": {"concurrency": 3},
    }
    config = FrontierConfig.from_settings(project(CRAWL_HOST_OVERRIDES=json.dumps(overrides)))
    o = config.host_overrides
    # The scheme://host entry wins over the bare host's: both name one server.
    assert (o["example.com"].delay_seconds, o["example.com"].concurrency) == (2, 2)
    assert o["other.test"].concurrency == 3
    with pytest.raises(ConfigError, match=r"name one server \(a\.test: http and https"):
        FrontierConfig.from_settings(
            project(
                CRAWL_HOST_OVERRIDES={"http://a.test": {"delay": 1}, "https://a.test": {"delay": 2}}
            )
        )
    with pytest.raises(ConfigError, match=r"'example\.com/a' is neither a host"):
        FrontierConfig.from_settings(project(CRAWL_HOST_OVERRIDES={"example.com/a": {"delay": 1}}))
    with pytest.raises(ConfigError, match=r"write 'example\.com'"):
        FrontierConfig.from_settings(
            project(
                CRAWL_POLITENESS_KEY="domain",
                CRAWL_HOST_OVERRIDES={"www.example.com": {"delay": 1}},
            )
        )


def test_allow_domains_follows_scrapy_and_patterns_refuse_what_matches_nothing() -> None:
    rules = UrlRules.from_settings(
        Settings({"CRAWL_ALLOW_DOMAINS": ["example.com"], "CRAWL_ALLOW_HOSTS": ["solo.test"]})
    )
    assert rules.check("https://example.com/") is None
    assert rules.check("https://a.b.example.com/") is None  # subdomains, as allowed_domains
    assert rules.check("https://notexample.com/") == "host_not_allowed"
    assert rules.check("https://solo.test/") is None
    assert rules.check("https://www.solo.test/") == "host_not_allowed"  # a host: exactly it
    assert HostPatterns(["bücher.de"]).matches("xn--bcher-kva.de")
    for bad, hint in [
        ("*.example.com", "write '.example.com'"),
        ("https://example.com", "write the host alone, 'example.com'"),
        ("example.com:8080", "write the host alone"),
        ("exa mple.com", "not a host name"),
    ]:
        with pytest.raises(ConfigError, match=hint):
            HostPatterns([bad], setting="CRAWL_ALLOW_HOSTS")


def test_scrapy_robots_user_agent_and_dns_cache_size_are_honoured() -> None:
    assert RobotsConfig.from_settings(project()).user_agent_token == "crawlproject"
    ua = project(ROBOTSTXT_USER_AGENT="MyBot/2.0 (+https://example.com/bot)", USER_AGENT="MyBot/2")
    assert RobotsConfig.from_settings(ua).user_agent_token == "MyBot"
    same = project(ROBOTSTXT_USER_AGENT="MyBot", CRAWL_ROBOTS_USER_AGENT="MyBot")
    assert RobotsConfig.from_settings(same).user_agent_token == "MyBot"
    with pytest.raises(ConfigError, match="disagree"):
        RobotsConfig.from_settings(
            project(ROBOTSTXT_USER_AGENT="MyBot", CRAWL_ROBOTS_USER_AGENT="other")
        )
    with pytest.raises(ConfigError, match="product token"):
        RobotsConfig.from_settings(project(ROBOTSTXT_USER_AGENT="/1.0"))
    assert DnsConfig.from_settings(project()).cache_size == 100_000
    assert DnsConfig.from_settings(project(DNSCACHE_SIZE="5000")).cache_size == 5000
    with pytest.raises(ConfigError, match="DNSCACHE_SIZE='5000' and CRAWL_DNS_CACHE_SIZE"):
        DnsConfig.from_settings(project(DNSCACHE_SIZE="5000", CRAWL_DNS_CACHE_SIZE=10))


def test_the_cli_refuses_what_a_worker_refuses_in_one_line() -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "crawlproject", "-s", "SCHEDULER_QUEUE_CLASS=x.Y", "counts"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cli.returncode == 1
    assert cli.stderr.startswith("crawlproject: SCHEDULER_QUEUE_CLASS='x.Y' cannot apply")
    assert len(cli.stderr.splitlines()) == 1, cli.stderr
