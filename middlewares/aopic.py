"""AOPIC credit sharing: a fetched page's credit goes, in equal parts, to its links.

The frontier hands a claimed URL out with the credit it may pass on (its
credit less the lambda tax; ``crawl_credit_share`` in ``Request.meta``). This
middleware waits for the whole output of the page's callback, counts the
requests in it (the links, after every middleware closer to the spider has
dropped what it drops) and gives each ``share / n`` (``crawl_credit``); the
frontier adds that to a link's credit whether it is new or already queued.
A link may carry a weight below 1 (``crawl_credit_weight``: the links of a
mirror's copy, middlewares/dedupe.py): it gets that fraction of its part and the
rest goes to the lambda cash. Items pass through at once. Only with a
credit-mode ``CRAWL_PRIORITY_POLICY`` (``aopic``); otherwise NotConfigured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from crawlproject.component_off import switched_off
from crawlproject.frontier.admission.priority import CREDIT_MODE, policy_class
from crawlproject.frontier.basics.request_meta import (
    CREDIT_META_KEY,
    CREDIT_WEIGHT_META_KEY,
    SHARE_META_KEY,
)
from crawlproject.frontier.scrapy_glue.frontier_lookup import frontier_of, require_frontier
from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler
from crawlproject.setting_values import crawl_setting


class AopicCreditMiddleware:
    def __init__(self, crawler: Crawler, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.stats = stats

    @property
    def frontier(self) -> FrontierScheduler:
        return frontier_of(self.crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AopicCreditMiddleware:
        name = crawl_setting(crawler.settings, "CRAWL_PRIORITY_POLICY")
        if getattr(policy_class(name), "mode", None) != CREDIT_MODE:
            why = f"CRAWL_PRIORITY_POLICY={name!r} does not use credit"
            raise switched_off(cls, crawler.settings, why, "CRAWL_PRIORITY_POLICY")
        require_frontier(crawler)
        assert crawler.stats is not None
        return cls(crawler=crawler, stats=crawler.stats)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        share = response.meta.get(SHARE_META_KEY)
        if not isinstance(share, (int, float)):
            async for item in result:
                yield item
            return
        links: list[Request] = []
        async for item in result:
            if isinstance(item, Request):
                links.append(item)
            else:
                yield item
        if not links:
            # AOPIC's dangling page: its credit goes to the lambda page, so the
            # crawl's total credit is kept.
            self.stats.inc_value("aopic/pages_without_links")
            if response.request is not None:
                self.frontier.give_credit(response.request, float(share))
            return
        each = float(share) / len(links)
        held_back = 0.0
        for request in links:
            # A weight below 1 (a mirror copy's link) gets less; the rest of
            # its part goes to the lambda cash, so the total credit is kept.
            weight = min(max(float(request.meta.pop(CREDIT_WEIGHT_META_KEY, 1.0)), 0.0), 1.0)
            request.meta[CREDIT_META_KEY] = each * weight
            held_back += each * (1.0 - weight)
            yield request
        if held_back > 0 and response.request is not None:
            self.frontier.give_credit(response.request, held_back)
