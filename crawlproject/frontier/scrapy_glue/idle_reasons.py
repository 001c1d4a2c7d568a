"""Why a worker has nothing to do from its start, said once (crawl_end.py
calls :meth:`IdleReasons.first_idle` when the frontier is first seen empty,
with nothing in flight anywhere and this worker's start requests read):

* its crawl was finished before it came (URLs done, none queued, and nothing
  this worker offered was new: run twice with the same seeds): one INFO line
  with the ways to crawl again;
* it has no seeds (none from the spider, ``-a seeds=``, the seed list) and
  the crawl has none done: one WARNING with the ways to give them.

Either way the usual idle end follows. A worker that saw work (URLs queued or
leased, a claim of its own, a URL it added) says nothing: the crawl ended
under it, as crawls do. Seeds come from the spider's start requests (Scrapy's
public ``request_scheduled`` signal, meta ``is_start_request``), ``-a seeds=``
and the seed list (the stats that seeds.py keeps).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import Request, Spider, signals

from crawlproject.frontier.admission.seeds import START_META_KEY, argument_seeds
from crawlproject.frontier.basics.request_meta import SEED_META_KEY

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawlproject.frontier.store.keys import CrawlKeys

logger = logging.getLogger("crawlproject.frontier.scheduler")  # with the crawl's end lines

# This worker did something, or had seeds from the seed list (seeds.py, seed_check.py).
WORK_STATS = ("frontier/claims", "frontier/enqueued")
SEED_LIST_STATS = ("frontier/start_urls", "frontier/bad_start_url", "seeds/refused")


class IdleReasons:
    def __init__(self, crawler: Crawler | None) -> None:
        self.stats = crawler.stats if crawler is not None else None
        self._spider: Spider | None = None
        self._crawl = self._seed_list = ""
        self._idle_seconds = 0.0
        self._seeded = False  # a start request went to the scheduler
        self._worked = False  # URLs were queued or leased while this worker ran
        self._said = False
        if crawler is not None:
            crawler.signals.connect(self._scheduled, signals.request_scheduled)

    def watch(self, spider: Spider, keys: CrawlKeys, idle_seconds: float) -> None:
        self._spider = spider
        self._crawl, self._seed_list = keys.crawl, keys.start_urls
        self._idle_seconds = idle_seconds

    def _scheduled(self, request: Request, spider: Spider) -> None:
        if request.meta.get(START_META_KEY) or request.meta.get(SEED_META_KEY):
            self._seeded = True

    def saw_work(self) -> None:
        self._worked = True

    def first_idle(self, done: int) -> None:
        """The frontier is empty and nothing is in flight: say why, if this
        worker never had anything to do (module docstring)."""
        if self._said or self._worked or self._stat(WORK_STATS):
            return
        self._said = True
        crawl = self._crawl
        if done > 0:
            logger.info(
                "Crawl %r was already finished: %d URL(s) done, none queued, and no seed of "
                "this run was new. To fetch again: crawlproject --crawl %s recrawl --all (the "
                "URLs tracked for recrawl); to start over: crawlproject reset --crawl %s, or "
                "-s SCHEDULER_FLUSH_ON_START=True; or crawl under another name (-a crawl=NAME)",
                crawl,
                done,
                crawl,
                crawl,
            )
            return
        if self._seeded or argument_seeds(self._spider) or self._stat(SEED_LIST_STATS):
            return  # seeds that were all refused: said where they were refused
        logger.warning(
            "No seeds: crawl %r has nothing queued and nothing done. Give seeds with "
            "-a seeds=URL,URL or -a seeds_file=FILE, or while this worker waits (%g s, "
            "CRAWL_IDLE_CLOSE_SECONDS): crawlproject --crawl %s seed URL (or LPUSH %s URL)",
            crawl,
            self._idle_seconds,
            crawl,
            self._seed_list,
        )

    def _stat(self, names: tuple[str, ...]) -> bool:
        return self.stats is not None and any(self.stats.get_value(n) for n in names)
