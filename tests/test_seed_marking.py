"""Seeds carry the operator's vote whatever the spider (crawlproject/frontier/admission/seeds.py,
admission.py): start requests, ``-a seeds=`` a spider does not take, and the
start-URLs list; and an unstorable request is refused before it is seen."""

from __future__ import annotations

from typing import Any

from scrapy import Request, Spider
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawlproject.frontier.admission.admission import Admission, Refusal
from crawlproject.frontier.admission.priority import DepthPriority
from crawlproject.frontier.admission.seeds import SeedReader, argument_seeds, mark_seed
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY, SEED_META_KEY
from crawlproject.frontier.basics.urls import UrlCanonicalizer
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.frontier.store.redis_frontier import SEED_VOTE, NewEntry
from crawlproject.rules.url_rules import UrlRules


def _admission() -> Admission:
    settings = Settings()
    settings.setmodule("crawlproject.settings")
    config = FrontierConfig.from_settings(settings)
    return Admission(
        config,
        UrlRules.from_settings(settings),
        DepthPriority(),
        UrlCanonicalizer(config.session_params),
        RequestCodec(config.request_classes),
    )


class Tutorial(Spider):
    name = "tutorial"

    def parse(self, response: Any) -> None: ...


def test_a_start_request_is_admitted_as_a_seed_with_its_host_as_scope() -> None:
    request = Request("http://Shop.test:8080/list?p=1", meta={"is_start_request": True})
    entry = _admission().admit(request, Tutorial(), None)
    assert isinstance(entry, NewEntry) and entry.vote == SEED_VOTE
    assert request.meta[SEED_META_KEY] is True
    assert request.meta[SCOPE_META_KEY] == "shop.test:8080"
    # A link a page yields is no seed; a start request the spider opted out is none.
    link = _admission().admit(Request("http://shop.test/a"), Tutorial(), None)
    assert isinstance(link, NewEntry) and link.vote != SEED_VOTE
    out = Request("http://shop.test/b", meta={"is_start_request": True, SEED_META_KEY: False})
    entry = _admission().admit(out, Tutorial(), None)
    assert isinstance(entry, NewEntry) and entry.vote != SEED_VOTE


def test_mark_seed_keeps_the_spiders_scope() -> None:
    request = mark_seed(Request("http://a.test/", meta={SCOPE_META_KEY: "a.test"}))
    assert request.meta == {SEED_META_KEY: True, SCOPE_META_KEY: "a.test"}


def test_seeds_argument_of_a_spider_that_does_not_take_it() -> None:
    assert argument_seeds(Tutorial(seeds="http://a.test/, http://b.test/,")) == [
        "http://a.test/",
        "http://b.test/",
    ]
    assert argument_seeds(Tutorial()) == [] and argument_seeds(None) == []
    assert argument_seeds(Tutorial(seeds=["http://c.test/"])) == ["http://c.test/"]


def test_start_urls_entries_are_seeds_with_the_spiders_default_callback() -> None:
    reader = SeedReader(get_crawler(Tutorial).stats)
    request = reader.request_of(b'{"url": "http://a.test/x", "meta": {"k": 1}}', Tutorial())
    assert request is not None and request.callback is None  # Scrapy: the spider's parse
    assert request.meta == {"k": 1, SEED_META_KEY: True, SCOPE_META_KEY: "a.test"}


def test_an_unstorable_request_is_not_remembered_as_sent() -> None:
    admission, spider = _admission(), Tutorial()
    refused = admission.admit(Request("http://a.test/p", callback=lambda r: None), spider, None)
    assert refused == Refusal("frontier/unstorable/callback")
    again = admission.admit(Request("http://a.test/p", callback=spider.parse), spider, None)
    assert isinstance(again, NewEntry)  # not a local seen hit
