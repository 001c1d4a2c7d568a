"""Waking Scrapy's engine when the frontier has something for it.

After the scheduler's ``next_request()`` returns None, Scrapy 2.19's engine
asks again only when a download finishes, a request is crawled, or its 5 s
heartbeat fires; on a delay-bound crawl that heartbeat would set the pace. The
engine has no public "poll now" call, so this one function reaches its
``_slot.nextcall`` (a CallLaterOnce). Scrapy is pinned to 2.19.x for this;
tests/test_scrapy_private_api.py fails by name if Scrapy changes it, and
without it the crawl still runs, at the heartbeat's pace.
"""

from __future__ import annotations

import logging

from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def wake_engine(crawler: Crawler) -> bool:
    """Asks the engine to poll the scheduler on the next reactor turn."""
    engine = crawler.engine
    slot = getattr(engine, "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is None:
        return False
    nextcall.schedule()
    return True
