"""A spider written for scrapy-redis (``RedisSpider``, ``RedisCrawlSpider``:
scrapy-redis's ``RedisMixin``) on the shared frontier, unchanged.

* Its start URLs: the frontier reads the spider's ``redis_key`` list
  (``LPUSH myspider:start_urls URL``, plain URLs or JSON ``{"url": ..., "meta":
  ...}``) as the crawl's seed list, storing each URL before it leaves the list
  (scrapy-redis pops them, and a worker that dies loses them). In scrapy-redis's
  README case, ``redis_key = "<name>:start_urls"`` with the crawl named after the
  spider, that is the list the frontier reads anyway.
* Its end: scrapy-redis's ``RedisMixin.spider_idle`` raises ``DontCloseSpider``
  on every idle signal (it waits for more start URLs for ever, unless
  ``MAX_IDLE_TIME_BEFORE_CLOSE`` says otherwise), and the frontier's scheduler
  only lets the engine go idle once the crawl is over for the whole fleet
  (crawl_end.py). So that handler is disconnected (Scrapy's public
  ``SignalManager.disconnect``; the handler is the bound method scrapy-redis's
  ``setup_redis`` connected): the spider ends as any spider does, after
  ``CRAWL_IDLE_CLOSE_SECONDS`` of a fleet-wide empty frontier, or after
  ``MAX_IDLE_TIME_BEFORE_CLOSE`` seconds when that is set (> 0: scrapy-redis's
  meaning, idle seconds before closing; 0, scrapy-redis's "never", is its
  default, read as not set). Continuous mode (``-a mode=continuous``) keeps it up
  as it keeps any spider up, reading new start URLs as they come.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.settings import BaseSettings

from crawlproject.setting_values import ConfigError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawlproject.frontier.store.keys import CrawlKeys

logger = logging.getLogger(__name__)

MAX_IDLE = "MAX_IDLE_TIME_BEFORE_CLOSE"


def is_redis_spider(spider: object) -> bool:
    """Whether ``spider`` is scrapy-redis's (its ``RedisMixin``). Told by the
    class's ancestry, not by importing scrapy-redis: the worker does not depend
    on it (requirements.txt), only a spider written for it does."""
    return any(
        cls.__name__ == "RedisMixin" and cls.__module__.split(".")[0] == "scrapy_redis"
        for cls in type(spider).__mro__
    )


def max_idle_seconds(spider: object, settings: BaseSettings) -> float | None:
    """``MAX_IDLE_TIME_BEFORE_CLOSE`` (a scrapy-redis spider's ``max_idle_time``,
    which scrapy-redis reads from the setting) when above 0, else None."""
    value: Any = getattr(spider, "max_idle_time", None) if is_redis_spider(spider) else None
    if value is None:
        value = settings.get(MAX_IDLE)
    if value in (None, ""):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{MAX_IDLE}={value!r} must be a number of seconds") from None
    return seconds if seconds > 0 else None


def adopt_redis_spider(crawler: Crawler, spider: object, keys: CrawlKeys) -> None:
    """For a scrapy-redis spider: its ``redis_key`` becomes the crawl's seed
    list and its idle handler is taken off (module docstring)."""
    if not is_redis_spider(spider):
        return
    handler = getattr(spider, "spider_idle", None)
    if callable(handler):
        crawler.signals.disconnect(handler, signal=signals.spider_idle)
    redis_key = getattr(spider, "redis_key", None)
    if isinstance(redis_key, str) and redis_key and redis_key != keys.start_urls:
        keys.start_urls = redis_key
    logger.info(
        "scrapy-redis spider %r: its start URLs are read from %r by the frontier; it "
        "ends when the crawl does (scrapy-redis's idle wait is off)",
        getattr(spider, "name", "?"),
        keys.start_urls,
    )
