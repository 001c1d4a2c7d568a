"""Drop pages the fleet has already seen, exactly or nearly.

The verdict comes from middlewares/dedupe.py (which must run: it asks the
shared index while the page's links are still held back); this pipeline
turns it into Scrapy's ``DropItem`` and the ``dedupe/exact`` and
``dedupe/near`` stats, so nothing downstream (storage, feeds) sees a copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem, NotConfigured

from crawlproject.dedupe.config import DedupeConfig

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class DuplicatePage(DropItem):
    """The page duplicates one the fleet kept earlier."""


class DedupePipeline:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DedupePipeline:
        if not DedupeConfig.from_settings(crawler.settings).enabled:
            raise NotConfigured("CRAWL_DEDUPE_ENABLED is off")
        assert crawler.stats is not None
        return cls(crawler.stats)

    def process_item(self, item: Any) -> Any:
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
