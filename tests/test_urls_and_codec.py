"""Pure logic: canonical URLs, fingerprints, the JSON request codec, settings checks."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest
from scrapy.settings import Settings

from crawlproject import default_settings
from crawlproject.frontier.basics.urls import InvalidURL, UrlCanonicalizer, domain_key, host_key
from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.store.codec import RequestCodec, RequestDecodeError, RequestEncodeError

CANON = UrlCanonicalizer(default_settings.CRAWL_SESSION_PARAMS)
CODEC = RequestCodec(default_settings.CRAWL_REQUEST_CLASSES)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM:80/a/../b?z=1&a=2#frag", "http://example.com/b?a=2&z=1"),
        ("https://example.com:443", "https://example.com/"),
        ("https://example.com:8443/x", "https://example.com:8443/x"),
        ("http://e.com/p?PHPSESSID=abc&q=1&sid=9", "http://e.com/p?q=1"),
        ("http://e.com/p;jsessionid=ABC123?q=1", "http://e.com/p?q=1"),
        ("http://e.com/caf%C3%A9 x", "http://e.com/caf%C3%A9%20x"),
    ],
)
def test_canonicalize(url: str, expected: str) -> None:
    assert CANON.canonicalize(url) == expected


@pytest.mark.parametrize("url", ["mailto:a@b.c", "ftp://e.com/", "http:///nohost", "http://[::1"])
def test_canonicalize_rejects(url: str) -> None:
    with pytest.raises(InvalidURL):
        CANON.canonicalize(url)


def test_fingerprint_is_8_bytes_and_depends_on_method_and_body() -> None:
    url = CANON.canonicalize("http://e.com/a")
    get = CANON.fingerprint(url)
    assert len(get) == 8
    assert CANON.fingerprint(url, "POST", b"x") != get
    assert CANON.fingerprint(url, "POST", b"x") != CANON.fingerprint(url, "POST", b"y")
    assert CANON.fingerprint(CANON.canonicalize("http://E.com:80/a#z")) == get


def test_politeness_keys() -> None:
    # The server: http and https of one host share it; another port is another server.
    assert host_key("https://a.example.co.uk:8443/x") == "a.example.co.uk:8443"
    assert host_key("http://a.example.co.uk/x") == "a.example.co.uk"
    assert host_key("https://a.example.co.uk/") == "a.example.co.uk"
    assert domain_key("https://a.b.example.co.uk/x") == "example.co.uk"
    assert domain_key("http://127.0.3.1:8080/") == "127.0.3.1"


class _Spider(Spider):
    name = "s"

    def parse(self, response: object) -> None: ...

    def on_error(self, failure: object) -> None: ...


def test_codec_round_trip_keeps_everything() -> None:
    spider = _Spider()
    req = Request(
        "http://e.com/post?q=1",
        method="PUT",
        body=b"\x00\xffbinary body",
        headers={"X-Token": "abc", "Accept": ["a/b", "c/d"]},
        cookies={"k": "v"},
        meta={"depth": 3, "crawl_scope": "e.com", "crawl_lease": "0:9"},
        priority=-4,
        dont_filter=True,
        callback=spider.parse,
        errback=spider.on_error,
        cb_kwargs={"page": 2},
        flags=["f"],
    )
    data = CODEC.encode(req, spider)
    assert b"crawl_lease" not in data  # frontier bookkeeping is not stored
    out = CODEC.decode(data, spider)
    assert (out.url, out.method, out.body, out.priority) == (req.url, "PUT", req.body, -4)
    assert out.headers.getlist("Accept") == [b"a/b", b"c/d"]
    assert out.headers["X-Token"] == b"abc"
    assert out.meta == {"depth": 3, "crawl_scope": "e.com"}
    assert out.callback == spider.parse and out.errback == spider.on_error
    assert (out.cb_kwargs, out.flags, out.dont_filter, out.cookies) == (
        {"page": 2}, ["f"], True, {"k": "v"}
    )  # fmt: skip


def test_codec_plain_get_is_compact() -> None:
    data = CODEC.encode(Request("http://e.com/a", meta={"depth": 1}), None)
    assert data == b"@1http://e.com/a"  # tag (nothing else set), depth, URL: test_codec_compact.py
    assert CODEC.decode(data, None).meta == {"depth": 1}


def test_codec_subclass_allowed() -> None:
    req = FormRequest("http://e.com/f", formdata={"a": "1"})
    out = CODEC.decode(CODEC.encode(req, None), None)
    assert type(out) is FormRequest and out.body == b"a=1"


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b'["url"]',
        b'{"url": "http://e.com/", "_class": "os.system"}',
        b'{"url": "http://e.com/", "callback": "_private"}',
        b'{"url": "http://e.com/", "callback": "no_such_method"}',
    ],
)
def test_codec_refuses_what_could_run_code_or_is_broken(data: bytes) -> None:
    with pytest.raises(RequestDecodeError):
        CODEC.decode(data, _Spider())


def test_codec_refuses_non_json_meta() -> None:
    with pytest.raises(RequestEncodeError):
        CODEC.encode(Request("http://e.com/", meta={"obj": object()}), None)


def _settings(**kw: object) -> Settings:
    s = Settings()
    s.setmodule("crawlproject.settings")
    s.update(kw)
    return s


def test_config_reads_defaults_and_overrides() -> None:
    c = FrontierConfig.from_settings(
        _settings(CRAWL_HOST_DELAY=2.5, CRAWL_HOST_OVERRIDES={"http://a": {"delay": 9}})
    )
    assert c.host_delay_ms == 2500 and c.host_concurrency == 1 and c.redis_url is None
    assert c.host_overrides["a"].delay_seconds == 9.0


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"DOWNLOAD_DELAY": 1.0}, "DOWNLOAD_DELAY"),
        ({"AUTOTHROTTLE_ENABLED": True}, "AUTOTHROTTLE"),
        ({"CRAWL_HOST_CONCURRENCY": 4, "CONCURRENT_REQUESTS_PER_DOMAIN": 2}, "PER_DOMAIN"),
        ({"CRAWL_POLITENESS_KEY": "ip"}, "POLITENESS_KEY"),
        ({"CRAWL_HOST_OVERRIDES": {"h": {"delay": 1, "speed": 2}}}, "OVERRIDES"),
        ({"CRAWL_LEASE_SECONDS": 0.1}, "LEASE"),
    ],
)
def test_config_rejects_conflicts(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        FrontierConfig.from_settings(_settings(**kw))


def test_codec_refuses_callbacks_that_are_not_spider_methods() -> None:
    with pytest.raises(RequestEncodeError):
        CODEC.encode(Request("http://e.com/", callback=lambda r: None), _Spider())
    other = _Spider()
    with pytest.raises(RequestEncodeError):
        CODEC.encode(Request("http://e.com/", callback=other.parse), None)


def test_ack_middlewares_switch_off_without_the_frontier() -> None:
    from scrapy.exceptions import NotConfigured
    from scrapy.utils.test import get_crawler

    from middlewares.frontier_ack import (
        FrontierAckDownloaderMiddleware,
        FrontierAckSpiderMiddleware,
    )

    for scheduler in ("scrapy.core.scheduler.Scheduler", "scrapy_redis.scheduler.Scheduler"):
        crawler = get_crawler(settings_dict={"SCHEDULER": scheduler})
        for mw in (FrontierAckSpiderMiddleware, FrontierAckDownloaderMiddleware):
            with pytest.raises(NotConfigured):
                mw.from_crawler(crawler)
    crawler = get_crawler(
        settings_dict={"SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler"}
    )
    assert FrontierAckSpiderMiddleware.from_crawler(crawler) is not None


def test_recent_fingerprints_are_bounded() -> None:
    from crawlproject.once import Generations

    recent: Generations[bytes] = Generations(3)
    for i in range(7):
        recent.add(bytes([i]))
    assert bytes([6]) in recent and bytes([3]) in recent  # young and old generations
    assert bytes([0]) not in recent and bytes([2]) not in recent  # dropped with the oldest
    off: Generations[bytes] = Generations(0)
    off.add(b"x")
    assert b"x" not in off
