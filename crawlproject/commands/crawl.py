"""``scrapy crawl``, with an exit status a supervisor can act on.

Scrapy exits 1 only when a crawl fails before its spider opens. A worker whose
frontier cannot be opened or fails mid-crawl, or whose pipelines cannot save
what it fetches, closes its spider with a reason of its own
(``frontier_unavailable``, ``frontier_error``, ``item_not_saved``:
crawlproject/frontier/basics/outcomes.py) and Scrapy would exit 0: Scrapyd, systemd
or a shell loop would take a broken worker for a finished crawl. Here those
reasons exit 1.

Settings the worker cannot mean (a value that cannot be read as its
setting's type, a scrapy-redis scheduler setting, a ``CRAWL_HOST_OVERRIDES``
key that names no host, ...: ``ConfigError``) end the start before the crawl
with one log line and exit status 1, not a traceback from inside the engine.
A name that is no setting but looks meant as one (``CRAWL_HOST_DELAI``) is
one WARNING each, with the closest known name (crawlproject/setting_check.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from crawlproject.dns.resolver import DnsConfig
from crawlproject.frontier.basics.outcomes import FAILED_FINISH_REASONS
from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.crawl.redis_settings import refuse_scrapy_redis
from crawlproject.frontier.crawl.scrapy_politeness import as_taken
from crawlproject.frontier.scrapy_glue.frontier_lookup import is_frontier
from crawlproject.frontier.scrapy_glue.scrapy_scheduling import refuse_scrapy_scheduling
from crawlproject.redis_calls import outage_seconds
from crawlproject.rules.url_rules import UrlRules
from crawlproject.setting_check import misspelt_settings, refuse_unreadable
from crawlproject.setting_values import crawl_setting
from crawlproject.store.config import BodyStoreConfig

if TYPE_CHECKING:
    import argparse

logger = logging.getLogger(__name__)


def refusal(settings: BaseSettings, spidercls: type | None = None) -> str | None:
    """Why the worker refuses to start with ``settings`` (one line), or None."""
    try:
        # First: every component below reads its settings with Scrapy's getters,
        # which raise ValueError (a traceback) on a value they cannot read.
        refuse_unreadable(settings)
        # As the crawl will hold them once the add-on (run later, in the crawl)
        # took the spider's own politeness, its class attributes too, as the fleet's.
        settings = as_taken(settings, spidercls)
        refuse_scrapy_redis(settings)
        outage_seconds(settings)
        if is_frontier(load_object(settings["SCHEDULER"])):
            FrontierConfig.from_settings(settings)
            refuse_scrapy_scheduling(settings)  # DEPTH_PRIORITY, SCHEDULER_*_QUEUE
        # Read later inside the engine or the reactor, where a refusal is a traceback.
        UrlRules.from_settings(settings)
        DnsConfig.from_settings(settings)
        if crawl_setting(settings, "CRAWL_STORE_ENABLED"):
            BodyStoreConfig.from_settings(settings)
    except ConfigError as exc:
        return str(exc)
    return None


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1 or self.crawler_process is None:
            super().run(args, opts)  # Scrapy's usage errors
            return
        crawler = self._create_crawler(args[0])
        # With the spider's custom_settings: a misspelt name there is said too.
        for line in misspelt_settings(crawler.settings):
            logger.warning("%s", line)
        refused = refusal(crawler.settings, crawler.spidercls)
        if refused is not None:
            logger.error("Not started: %s", refused)
            self.exitcode = 1
            return
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        reason = crawler.stats.get_value("finish_reason") if crawler.stats else None
        if self.crawler_process.bootstrap_failed or reason in FAILED_FINISH_REASONS:
            self.exitcode = 1
