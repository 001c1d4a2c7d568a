"""Soft-404 logic (crawlproject/dedupe/soft404.py) and the follow-links setting,
with a real Redis for the fleet's registry."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import pytest
from scrapy.settings import Settings

from crawlproject.dedupe.config import DedupeConfig, follow_links_value
from crawlproject.dedupe.fingerprint import text_fingerprint
from crawlproject.dedupe.soft404 import (
    NO_SOFT404,
    PENDING,
    NotFoundPage,
    Soft404Registry,
    echoes_path,
    host_state,
    probe_path,
    probe_url,
    soft404_hosts,
    strip_echo,
)
from crawlproject.frontier.connection.redis_client import redis_client
from crawlproject.frontier.crawl.config import ConfigError
from testkit.testweb import TestWeb
from tests.test_testweb import crawl_over_http, get, links_of

TEMPLATE = "Sorry, we could not find {} on this site. Try the search box or the home page."


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("other_host", "other_host"),
        ("ALL", "all"),
        ("none", "none"),
        (True, "all"),
        (False, "none"),
        ("True", "all"),
        ("false", "none"),
        ("1", "all"),
        ("0", "none"),
    ],
)
def test_follow_links_values(value: object, expected: str) -> None:
    assert follow_links_value(value) == expected


def test_follow_links_refuses_anything_else_in_one_line() -> None:
    settings = Settings({"CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS": "mirrors"})
    with pytest.raises(ConfigError) as err:
        DedupeConfig.from_settings(settings)
    message = str(err.value)
    assert "\n" not in message
    assert "CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS" in message and "'mirrors'" in message
    assert DedupeConfig.from_settings(Settings()).follow_duplicate_links == "other_host"


def test_probe_paths_are_random_and_cannot_be_a_site_page() -> None:
    paths = {probe_path() for _ in range(100)}
    assert len(paths) == 100
    assert all(re.fullmatch(r"/[0-9a-f]{16}-[0-9a-f]{16}\.html", p) for p in paths)
    url = probe_url("https://example.com:8443/a/b?c=d#e")
    assert re.fullmatch(r"https://example\.com:8443/[0-9a-f]{16}-[0-9a-f]{16}\.html", url)


def test_echoes_path() -> None:
    assert echoes_path("http://h/missing/more/", "Sorry, /missing/more/ is not here")
    assert echoes_path("http://h/missing/more/", "Sorry, /missing/more is not here")
    assert echoes_path("http://h/caf%C3%A9/x", "Nothing at /café/x")
    assert not echoes_path("http://h/p/3", "Host 1 page 3, some text")
    assert not echoes_path("http://h/", "a / b")  # "/" is too short to tell


def test_two_answers_of_one_template_are_the_same_page_once_the_echo_is_gone() -> None:
    probe = "http://h/0123456789abcdef-0123456789abcdef.html"
    page = "http://h/missing/other-2/more/other-4/more/"
    texts = {u: TEMPLATE.format(urlpath) for u, urlpath in ((probe, probe[8:]), (page, page[8:]))}
    raw = [text_fingerprint(t)[0] for t in texts.values()]
    found = NotFoundPage(text_fingerprint(strip_echo(texts[probe], probe))[0], "00", probe)
    echoless = text_fingerprint(strip_echo(texts[page], page))[0]
    # Short text: the raw SimHashes are far apart, the echoless ones equal.
    assert bin(raw[0] ^ raw[1]).count("1") > 3
    assert found.distance("ff", echoless) == 0
    assert found.distance("00", None) == 0  # the same body
    assert found.distance("ff", None) is None
    other = text_fingerprint("An article about rivers, lakes and the sea, at length.")[0]
    distance = found.distance("ff", other)
    assert distance is not None and distance > 3


def test_states_round_trip() -> None:
    page = NotFoundPage(0xABC, "d" * 40, "http://h/x-y.html")
    assert host_state(page.encode()) == page
    assert host_state(NotFoundPage(None, "e" * 40, "http://h/x").encode()) == NotFoundPage(
        None, "e" * 40, "http://h/x"
    )
    assert host_state(None) is None
    assert host_state(PENDING) == PENDING and host_state(NO_SOFT404) == NO_SOFT404
    assert host_state("garbage") == NO_SOFT404  # an unreadable state probes no more


async def test_one_worker_of_the_fleet_probes_a_host_and_all_see_the_verdict(
    redis_url: str,
) -> None:
    key = "cp:{t/dd}:soft404"
    a, b = redis_client(redis_url), redis_client(redis_url)
    try:
        first, second = Soft404Registry(a, key), Soft404Registry(b, key, refresh_seconds=60)
        assert await second.state("http://h") is None  # cached as "never suspect"
        assert await first.claim("http://h") is True
        assert await second.claim("http://h") is False  # HSETNX: one probe per fleet
        assert await first.claim("http://h") is False  # and once per worker
        assert await second.state("http://h") is None  # its cache, until refreshed
        assert await second.state("http://h", fresh=True) == PENDING
        page = NotFoundPage(7, "a" * 40, "http://h/0-1.html")
        await first.answer("http://h", page)
        assert await second.state("http://h", fresh=True) == page
        await first.redis.hset(key, "http://h", NO_SOFT404)
        assert await second.state("http://h", fresh=True) == page  # final: not read again
        assert await second.claim("http://g") is True
        await second.answer("http://g", None)
        await second.answer("http://k", NotFoundPage(None, "b" * 40, "http://k/2-3.html"))
        assert await soft404_hosts(a, key) == {"http://k": "http://k/2-3.html"}
    finally:
        await a.aclose()
        await b.aclose()


async def test_an_unsuspected_host_is_read_again_less_often_than_a_pending_one(
    redis_url: str,
) -> None:
    key = "cp:{t/dd}:soft404"
    a, b = redis_client(redis_url), redis_client(redis_url)
    try:
        prober = Soft404Registry(a, key)
        other = Soft404Registry(b, key, refresh_seconds=0, unsuspected_refresh_seconds=60)
        assert await other.state("http://h") is None
        assert await prober.claim("http://h") is True
        # Never suspected here: trusted for a minute (a suspect page reads it at once).
        assert await other.state("http://h") is None
        assert await other.state("http://h", fresh=True) == PENDING
        page = NotFoundPage(7, "a" * 40, "http://h/0-1.html")
        await prober.answer("http://h", page)
        assert await other.state("http://h") == page  # a pending state: read again
    finally:
        await a.aclose()
        await b.aclose()


def test_testweb_soft404_and_farm_hosts(testweb_factory: Callable[..., TestWeb]) -> None:
    web = testweb_factory(hosts=3, pages=4, traps={2: "soft404", 3: "farm"})
    # Over HTTP: the normal pages stay what they are; every other path of the
    # soft-404 host is its template echoing the path; the farm's pages link on.
    assert crawl_over_http(web, lambda u: web.trap_kind(u) is None) == web.expected_urls
    assert web.trap_fetches(web.log) == Counter({2: 0, 3: 0})
    soft, farm = web.base_url(2), web.base_url(3)
    assert web.trap_kind(soft + "p/3") is None and web.trap_kind(soft + "p/4") == "soft404"
    status, body = get(soft + "missing/more/")
    assert status == 200 and b"/missing/more/" in body
    assert sorted(links_of(soft + "missing/more/", body)) == sorted(
        [soft + "missing/more/more/", soft + "missing/more/other-3/", soft]
    )
    assert get(soft.rstrip("/") + probe_path())[0] == 200
    entry = [u for u in links_of(farm, get(farm)[1]) if web.trap_kind(u)]
    assert len(entry) == 3 and all(re.search(r"/f/[a-z]+-[a-z]+-\d+\.html$", u) for u in entry)
    status, body = get(entry[0])
    assert status == 200 and len([u for u in links_of(entry[0], body) if web.trap_kind(u)]) == 3
    assert get(farm + "f/no.html")[0] == 404 and web.trap_kind(farm + "f/no.html") is None
    assert web.trap_fetches(web.log) == Counter({2: 2, 3: 1})  # the probe path is a trap URL
