"""Tells the frontier which host each link was found on.

A spider middleware: every request a callback yields from a response gets
the response's host in ``meta["crawl_from"]``. The frontier turns a link
from another registered domain into that domain's vote for the link's host,
which grows the host's page budget (``CRAWL_HOST_BUDGET``; see
crawlproject/frontier/admission/link_votes.py and add.lua), and drops the key before the
request is stored, so it costs no bytes in Redis.

Off when budgets are off (``CRAWL_HOST_BUDGET = 0``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.http import Response

from crawlproject.component_off import switched_off
from crawlproject.frontier.admission.link_votes import LINK_FROM_META_KEY
from crawlproject.setting_values import crawl_setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class LinkSourceMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LinkSourceMiddleware:
        if not crawl_setting(crawler.settings, "CRAWL_HOST_BUDGET"):
            why = "CRAWL_HOST_BUDGET is 0: no votes to count"
            raise switched_off(cls, crawler.settings, why, "CRAWL_HOST_BUDGET")
        return cls()

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        host = urlsplit(response.url).hostname or ""
        async for obj in result:
            if isinstance(obj, Request) and LINK_FROM_META_KEY not in obj.meta:
                obj.meta[LINK_FROM_META_KEY] = host
            yield obj
