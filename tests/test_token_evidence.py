"""Which pages and links the token guard's evidence counts
(crawlproject/frontier/admission/token_evidence.py); what add.lua makes of it:
tests/test_trap_budgets.py, and real crawls: tests/test_stable_ids.py,
tests/test_trap_families.py."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.settings import Settings

from crawlproject.frontier.admission.admission import Admission
from crawlproject.frontier.admission.priority import DepthPriority
from crawlproject.frontier.admission.token_evidence import TokenEvidence, same_shape, token_page
from crawlproject.frontier.basics.urls import UrlCanonicalizer
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.codec import RequestCodec
from crawlproject.rules.url_rules import UrlRules

SESSION = "http://t.test/ps/8f3a91c2e07d4b5a/page3.html"


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


def test_a_page_with_a_token_shape_and_its_links_of_that_host_and_shape() -> None:
    admission = _admission()
    page = token_page(admission, SESSION)
    assert page is not None and page.pkey == "t.test" and len(page.shape) == 8
    assert same_shape(admission, "http://t.test/ps/0b1c2d3e4f5a6b7c/page7.html", page)
    assert not same_shape(admission, "http://u.test/ps/0b1c2d3e4f5a6b7c/page7.html", page)
    assert not same_shape(admission, "http://t.test/post/0b1c2d3e4f5a6b7c", page)
    assert not same_shape(admission, "http://t.test/about.html", page)
    assert not same_shape(admission, "not a url", page)
    assert token_page(admission, "http://t.test/blog/page/57") is None  # no token
    assert token_page(_admission(CRAWL_TRAP_TOKEN_URLS=0), SESSION) is None  # guard off


async def test_a_shape_is_eight_bytes() -> None:
    evidence = TokenEvidence(None, None)  # type: ignore[arg-type]  # refused before any call
    with pytest.raises(ValueError):
        await evidence.record("t.test", b"short", True, 0)
    await evidence.record("t.test", bytes(8), None, 0)  # nothing to write: no call
