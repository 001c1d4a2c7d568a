"""The worker's memory of the (vote, host) pairs it sent
(frontier/admission/link_votes.py SentVotes): each pair once while
remembered, never more than its size, the pairs a site repeats kept while
others come and go. Pure logic."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from crawlproject.frontier.admission.link_votes import LinkVotes, SentVotes, vote_of
from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig

VOTE = vote_of("other.org")


def test_a_pair_is_first_once() -> None:
    sent = SentVotes(10)
    assert sent.first(VOTE, "a.example")
    assert not sent.first(VOTE, "a.example")
    assert sent.first(VOTE, "b.example")  # another host
    assert sent.first(vote_of("third.net"), "a.example")  # another voter


def test_it_never_holds_more_than_its_size() -> None:
    sent = SentVotes(100)
    for i in range(10_000):
        assert sent.first(VOTE, f"h{i}.example")
        assert len(sent) <= 100
    # The oldest are forgotten: sent again (the frontier counts voters as a set).
    assert sent.first(VOTE, "h0.example")


def test_a_pair_that_keeps_coming_stays_while_others_pass() -> None:
    sent = SentVotes(100)
    assert sent.first(VOTE, "footer-link.example")
    for i in range(5_000):
        sent.first(VOTE, f"h{i}.example")
        if i % 40 == 0:  # seen again within a generation: moved to the young one
            assert not sent.first(VOTE, "footer-link.example")


def test_link_votes_use_it_and_refuse_a_size_below_two() -> None:
    votes = LinkVotes(remembered=4)
    assert votes.first(VOTE, "a.example")
    assert not votes.first(VOTE, "a.example")
    with pytest.raises(ValueError):
        SentVotes(1)


def test_its_size_is_a_setting_refused_below_two() -> None:
    def config(size: int) -> FrontierConfig:
        settings = Settings()
        settings.setmodule("crawlproject.settings")
        settings.set("CRAWL_SENT_VOTES_SIZE", size)
        return FrontierConfig.from_settings(settings)

    assert config(1000).sent_votes_size == 1000
    with pytest.raises(ConfigError, match="CRAWL_SENT_VOTES_SIZE must be >= 2"):
        config(1)
