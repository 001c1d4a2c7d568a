"""Links known by their exact string (crawlproject/frontier/admission/admission.py KnownLinks,
middlewares/known_links.py): a repeated link is judged without canonicalizing it,
exactly as admission would judge it, and a link that differs in any way is not."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawlproject.frontier.admission.admission import (
    Admission,
    KnownLink,
    KnownLinks,
    Refusal,
    SeenLocally,
)
from crawlproject.frontier.admission.depth_chains import STALE_META_KEY
from crawlproject.frontier.admission.link_votes import LINK_FROM_META_KEY, vote_of
from crawlproject.frontier.admission.priority import DepthPriority
from crawlproject.frontier.basics.request_meta import SEED_META_KEY
from crawlproject.frontier.basics.urls import InvalidURL, UrlCanonicalizer
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.redis_frontier import NO_PATTERN, NO_VOTE, SEED_VOTE, NewEntry
from crawlproject.rules.url_rules import UrlRules
from middlewares.known_links import KnownLinksMiddleware

FRONTIER = "crawlproject.frontier.scheduler.FrontierScheduler"


def _admission(**kw: Any) -> Admission:
    settings = Settings()
    settings.setmodule("crawlproject.settings")
    settings.update(kw)
    config = FrontierConfig.from_settings(settings)
    return Admission(
        config,
        UrlRules.from_settings(settings),
        DepthPriority(),
        UrlCanonicalizer(config.session_params),
        RequestCodec(config.request_classes),
    )


def _link(url: str, source: str | None = None, depth: int = 1, **kw: Any) -> Request:
    meta: dict[str, Any] = {"depth": depth}
    if source is not None:
        meta[LINK_FROM_META_KEY] = source
    meta.update(kw.pop("meta", {}))
    return Request(url, meta=meta, **kw)


def _slow(admission: Admission, url: str, **kw: Any) -> NewEntry | SeenLocally | Refusal:
    """What admission makes of the link without its string cache (canonicalized)."""
    admission._known = KnownLinks(0)
    return admission.admit(_link(url, **kw), None, None)


def test_a_repeated_link_is_judged_from_its_string_as_admission_judges_it() -> None:
    fast, slow = _admission(), _admission()
    url = "http://a.test/x?b=2&a=1#top"
    for adm in (fast, slow):
        assert isinstance(adm.admit(_link(url), None, None), NewEntry)
    calls: list[str] = []
    canonicalize = fast.canonicalizer.canonicalize

    def counted(url: str) -> str:
        calls.append(url)
        return canonicalize(url)

    fast.canonicalizer.canonicalize = counted  # type: ignore[method-assign]
    again = fast.admit(_link(url), None, None)
    assert calls == []  # not canonicalized a second time
    assert again == _slow(slow, url)
    assert isinstance(again, SeenLocally) and again.votes is None
    early = fast.known_link(_link(url), 1, None)  # the middleware's question: no credit asked
    assert early is not None and (early.pkey, early.fingerprint, early.votes) == (
        again.pkey,
        again.fingerprint,
        None,
    )


@pytest.mark.parametrize(
    "other",
    [
        "http://a.test/x?a=2&b=1",  # another query
        "http://a.test/X?a=1&b=2",  # path case is significant
        "https://a.test/x?a=1&b=2",  # another scheme
        "http://a.test:8080/x?a=1&b=2",  # another port
        "http://b.test/x?a=1&b=2",  # another host
        "http://a.test/x/?a=1&b=2",
    ],
)
def test_a_link_that_differs_after_canonicalization_is_never_taken_for_a_known_one(
    other: str,
) -> None:
    admission = _admission()
    admission.admit(_link("http://a.test/x?b=2&a=1"), None, None)
    assert admission.known_link(_link(other), 1, None) is None
    assert isinstance(admission.admit(_link(other), None, None), NewEntry)


def test_another_string_of_the_same_url_is_still_found_by_its_fingerprint() -> None:
    admission = _admission()
    admission.admit(_link("http://a.test/x?b=2&a=1"), None, None)
    alias = "HTTP://A.test:80/x?a=1&b=2#frag"
    assert admission.known_link(_link(alias), 1, None) is None  # another string
    assert isinstance(admission.admit(_link(alias), None, None), SeenLocally)
    assert admission.known_link(_link(alias), 1, None) is not None  # now known under it too


def test_a_known_link_still_carries_a_new_voter_once() -> None:
    admission = _admission()
    url = "http://target.com/page"
    admission.admit(_link(url, source="target.com"), None, None)
    first = admission.known_link(_link(url), 1, "www.other.org")  # the page's host
    assert first is not None and first.votes is not None
    assert first.votes.vote == vote_of("other.org") and first.votes.vote_only
    assert first.votes.pkey == "target.com"
    again = admission.known_link(_link(url, source="blog.other.org"), 1, None)  # same voter
    assert again is not None and again.votes is None
    same_site = admission.known_link(_link(url), 1, "www.target.com")
    assert same_site is not None and same_site.votes is None


def test_a_known_token_link_reports_every_repeat() -> None:
    admission = _admission()
    url = "http://t.test/item/3f9a1c2be48d7a60b5c4e1f2a3b4c5d6"
    first = admission.admit(_link(url), None, None)
    assert isinstance(first, NewEntry) and first.token_shape != NO_PATTERN
    for _ in range(2):
        seen = admission.known_link(_link(url), 1, None)
        assert seen is not None and seen.votes is not None
        assert seen.votes.token_shape == first.token_shape and seen.votes.vote == NO_VOTE


def test_what_is_not_a_plain_link_goes_the_whole_way() -> None:
    admission = _admission(CRAWL_MAX_DEPTH=3)
    url = "http://a.test/"
    admission.admit(_link(url), None, None)
    assert admission.known_link(_link(url, dont_filter=True), 1, None) is None
    assert admission.known_link(_link(url, method="POST", body=b"q=1"), 1, None) is None
    seed = _link(url, meta={SEED_META_KEY: True})
    assert admission.known_link(seed, 0, None) is None
    seen_seed = admission.admit(seed, None, None)
    assert isinstance(seen_seed, SeenLocally) and seen_seed.votes is not None
    assert seen_seed.votes.vote == SEED_VOTE
    # Beyond the depth guard (hops through pages that brought nothing new,
    # crawlproject/frontier/admission/depth_chains.py) admission refuses it, with its own stat.
    stale = {STALE_META_KEY: 4}
    assert admission.known_link(_link(url, depth=4, meta=stale), 4, None) is None
    assert admission.admit(_link(url, depth=4, meta=stale), None, None) == Refusal("trap/max_depth")
    assert admission.known_link(_link(url, depth=4), 4, None) is not None  # deep, novel


def test_known_links_are_bounded_and_keep_what_repeats() -> None:
    known = KnownLinks(3)
    entry = KnownLink("h", "h", b"12345678", None)
    known.add("http://h/keep", entry)
    for i in range(20):
        known.add(f"http://h/{i}", entry)
        assert known.get("http://h/keep") is not None or i >= 5  # moved up while it repeats
        assert len(known) <= 6
    assert known.get("http://h/0") is None  # dropped with its generation
    assert known.get("http://h/19") is not None
    off = KnownLinks(0)
    off.add("http://h/", entry)
    assert off.get("http://h/") is None and len(off) == 0


def test_the_middleware_is_off_where_every_link_must_reach_the_scheduler() -> None:
    with pytest.raises(NotConfigured):  # Scrapy's scheduler: no frontier
        KnownLinksMiddleware.from_crawler(get_crawler(settings_dict={}))
    with pytest.raises(NotConfigured):  # AOPIC shares credit among all links
        KnownLinksMiddleware.from_crawler(
            get_crawler(settings_dict={"SCHEDULER": FRONTIER, "CRAWL_PRIORITY_POLICY": "aopic"})
        )
    with pytest.raises(NotConfigured):
        KnownLinksMiddleware.from_crawler(
            get_crawler(settings_dict={"SCHEDULER": FRONTIER, "CRAWL_KNOWN_LINKS_SIZE": 0})
        )
    crawler = get_crawler(settings_dict={"SCHEDULER": FRONTIER})
    assert KnownLinksMiddleware.from_crawler(crawler) is not None


def test_politeness_keys_are_remembered_per_origin() -> None:
    admission = _admission()
    assert admission.politeness_key("http://A.test/x?y=1") == "a.test"
    assert admission.politeness_key("http://A.test/other#f") == "a.test"  # remembered
    assert admission.politeness_key("https://a.test:8443/") == "a.test:8443"
    assert admission.politeness_key("http://b.test") == "b.test"
    with pytest.raises(InvalidURL):
        admission.politeness_key("ftp://a.test/x")
    domains = _admission(CRAWL_POLITENESS_KEY="domain")
    assert domains.politeness_key("http://www.example.co.uk/a") == "example.co.uk"
