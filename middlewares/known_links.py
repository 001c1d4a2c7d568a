"""Drops the links this worker sent to the frontier before, as the spider yields them.

Most of a page's links were on the pages before it (a site's navigation, its
header and footer): on the CPU-bound benchmark six links in seven. Each would
otherwise go through every spider middleware below this one (Referer, depth,
the duplicate filter, the ack), the engine's ``request_scheduled`` signal and
the scheduler, only for admission to find it seen. Here a link whose exact
string this worker took before (admission.py's ``KnownLinks``) is finished at
once by ``FrontierScheduler.known_link``, as the scheduler would have finished
it: the ``frontier/seen_hits_local`` stat, and the vote or token-shape repeat
it carries for the trap guards. Anything else passes on untouched: a link not
remembered, a request that is not a plain link (a seed, ``dont_filter``, a
POST), a link beyond ``CRAWL_MAX_DEPTH`` (admission refuses it with its stat).

Order 970, the closest to the spider: a dropped link costs no other middleware
anything. The source host a link's vote comes from is the page's, as
middlewares/link_source.py (960) would note it when budgets are on
(``CRAWL_HOST_BUDGET``). Off (NotConfigured) without the frontier, with
``CRAWL_KNOWN_LINKS_SIZE = 0``, and with a credit-mode
``CRAWL_PRIORITY_POLICY`` (AOPIC): there a page's credit is shared among all
its links, known ones included (middlewares/aopic.py), so they must reach it;
admission still judges them by their string.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.http import Response

from crawlproject.component_off import switched_off
from crawlproject.frontier.admission.priority import CREDIT_MODE, policy_class
from crawlproject.frontier.scrapy_glue.frontier_lookup import frontier_of, require_frontier
from crawlproject.setting_values import crawl_setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler


class KnownLinksMiddleware:
    def __init__(self, crawler: Crawler, votes: bool) -> None:
        self.crawler = crawler
        self.votes = votes  # budgets on: links carry their page's host (link_source.py)
        self._scheduler: FrontierScheduler | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> KnownLinksMiddleware:
        require_frontier(crawler)
        if not crawl_setting(crawler.settings, "CRAWL_KNOWN_LINKS_SIZE"):
            why = "CRAWL_KNOWN_LINKS_SIZE is 0: no links are remembered"
            raise switched_off(cls, crawler.settings, why, "CRAWL_KNOWN_LINKS_SIZE")
        name = crawl_setting(crawler.settings, "CRAWL_PRIORITY_POLICY")
        if getattr(policy_class(name), "mode", None) == CREDIT_MODE:
            why = f"CRAWL_PRIORITY_POLICY={name!r} shares credit among all links"
            raise switched_off(cls, crawler.settings, why, "CRAWL_PRIORITY_POLICY")
        return cls(crawler, votes=bool(crawl_setting(crawler.settings, "CRAWL_HOST_BUDGET")))

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        scheduler = self._scheduler
        if scheduler is None:
            scheduler = self._scheduler = frontier_of(self.crawler)
        known = scheduler.known_link
        # The depth DepthMiddleware (900) will give the page's links.
        depth = response.meta.get("depth", 0)
        depth = depth + 1 if isinstance(depth, int) else 0
        source = (urlsplit(response.url).hostname or "") if self.votes else None
        async for obj in result:
            if isinstance(obj, Request) and known(obj, depth, source):
                continue
            yield obj
