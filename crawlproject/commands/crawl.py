"""``scrapy crawl``, with an exit status a supervisor can act on.

Scrapy exits 1 only when a crawl fails before its spider opens. A worker whose
frontier cannot be opened or fails mid-crawl, or whose pipelines cannot save
what it fetches, closes its spider with a reason of its own
(``frontier_unavailable``, ``frontier_error``, ``item_not_saved``:
crawlproject/frontier/outcomes.py) and Scrapy would exit 0: Scrapyd, systemd
or a shell loop would take a broken worker for a finished crawl. Here those
reasons exit 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawlCommand

from crawlproject.frontier.outcomes import FAILED_FINISH_REASONS

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1 or self.crawler_process is None:
            super().run(args, opts)  # Scrapy's usage errors
            return
        crawler = self._create_crawler(args[0])
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        reason = crawler.stats.get_value("finish_reason") if crawler.stats else None
        if self.crawler_process.bootstrap_failed or reason in FAILED_FINISH_REASONS:
            self.exitcode = 1
