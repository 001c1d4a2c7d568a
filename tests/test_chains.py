"""The depth guard's count (crawlproject/frontier/admission/depth_chains.py): hops since the last
page that brought new content, set on each link by the dedupe middleware and
refused by admission past ``CRAWL_MAX_DEPTH``. (Real crawls of a long listing
and of empty archives: tests/test_stable_ids.py.)"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.settings import Settings

from crawlproject.frontier.admission.admission import Admission, Refusal
from crawlproject.frontier.admission.depth_chains import (
    STALE_META_KEY,
    beyond,
    mark_link,
    stale_hops,
)
from crawlproject.frontier.admission.priority import DepthPriority
from crawlproject.frontier.basics.urls import UrlCanonicalizer
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.redis_frontier import NewEntry
from crawlproject.rules.url_rules import UrlRules


def test_a_novel_page_starts_its_links_again_a_stale_one_carries_its_count() -> None:
    page: dict[str, Any] = {"depth": 57}  # deep, but every page before brought content
    link: dict[str, Any] = {}
    mark_link(link, page, novel=True)
    assert STALE_META_KEY not in link and stale_hops(link) == 0  # nothing stored
    chain: dict[str, Any] = {}
    for hop in range(1, 5):
        nxt: dict[str, Any] = {}
        mark_link(nxt, chain, novel=False)
        assert stale_hops(nxt) == hop
        chain = nxt
    copied = dict(chain)  # a spider that copies the page's meta into its links
    mark_link(copied, chain, novel=True)
    assert stale_hops(copied) == 0


def test_the_guard_refuses_only_past_its_bound_and_never_when_off() -> None:
    assert not beyond({STALE_META_KEY: 20}, 20)
    assert beyond({STALE_META_KEY: 21}, 20)
    assert not beyond({STALE_META_KEY: 10**6}, 0)
    assert not beyond({"depth": 10**6}, 20)  # Scrapy's depth is not the guard's count
    for bad in ("3", -4, None, 2.5):
        assert stale_hops({STALE_META_KEY: bad}) == 0  # not ours: never refused for it


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


def test_admission_refuses_a_stale_chain_and_queues_a_deep_listing() -> None:
    admission = _admission(CRAWL_MAX_DEPTH=20)
    deep = Request("http://blog.test/page/400", meta={"depth": 400})
    assert isinstance(admission.admit(deep, None, None), NewEntry)
    ok = Request("http://cal.test/?m=20", meta={"depth": 21, STALE_META_KEY: 20})
    assert isinstance(admission.admit(ok, None, None), NewEntry)
    past = Request("http://cal.test/?m=21", meta={"depth": 22, STALE_META_KEY: 21})
    assert admission.admit(past, None, None) == Refusal("trap/max_depth")


def test_the_count_is_stored_with_the_request_only_when_not_zero() -> None:
    codec = RequestCodec(["scrapy.http.request.Request"])
    meta = {"depth": 5, "crawl_scope": "a.test"}
    fresh = codec.encode(Request("http://a.test/p/5", meta=dict(meta)), None)
    assert STALE_META_KEY.encode() not in fresh  # a link of a novel page: nothing more
    stored = codec.encode(Request("http://a.test/p/5", meta={**meta, STALE_META_KEY: 4}), None)
    assert stale_hops(codec.decode(stored, None).meta) == 4  # claimed back with its count
