"""Drop the fetch records of pages the fleet has already seen, exactly or nearly.

The verdict comes from middlewares/dedupe.py (which must run: it asks the
shared index while the page's links are still held back). It writes it into
the fetch record of a spider that keeps such records (``fetch_records = True``:
the ``web`` spider), never into any other item; this pipeline turns it into
Scrapy's ``DropItem`` and the ``dedupe/exact`` and ``dedupe/near`` stats, so
nothing downstream (storage, feeds) sees a copy. Another spider's items pass
untouched whatever fields they have (the middleware drops an exact copy's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from crawlproject.component_off import switched_off
from crawlproject.dedupe.config import DedupeConfig
from crawlproject.dedupe.verdict import FETCH_RECORDS_ATTR

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class DuplicatePage(DropItem):
    """The page duplicates one the fleet kept earlier."""


class DedupePipeline:
    def __init__(self, crawler: Crawler, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DedupePipeline:
        if not DedupeConfig.from_settings(crawler.settings).enabled:
            raise switched_off(
                cls, crawler.settings, "CRAWL_DEDUPE_ENABLED is off", "CRAWL_DEDUPE_ENABLED"
            )
        assert crawler.stats is not None
        return cls(crawler, crawler.stats)

    def process_item(self, item: Any) -> Any:
        if not getattr(self.crawler.spider, FETCH_RECORDS_ATTR, False):
            return item  # a user's item: its fields are its own
        adapter = ItemAdapter(item)
        kind = adapter.get("dedupe")
        if kind not in ("exact", "near"):
            return item
        self.stats.inc_value(f"dedupe/{kind}")
        distance = adapter.get("dedupe_distance")
        if kind == "near" and isinstance(distance, int):
            self.stats.inc_value(f"dedupe/near/distance_{distance}")
        original = adapter.get("duplicate_of") or "an earlier page"
        # Debug level: a crawl of the web drops millions of copies.
        raise DuplicatePage(f"{kind} duplicate of {original}", log_level="DEBUG")
