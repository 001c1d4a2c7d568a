"""``redisweb``: crawlproject's ``web`` spider logic on stock scrapy-redis.

The parse logic, LinkExtractor and host scope are inherited from
``spiders.web.WebSpider`` unchanged, so both crawls follow the same links.
Seeds come from ``-a seeds=...`` through ``start()`` (Scrapy 2.19 calls
``start()``, never ``start_requests()``); every worker yields them and the
shared RFPDupeFilter drops the repeats.

What is added is the one thing a plain Spider lacks on a shared queue: it
would close as soon as *its* engine is idle, while another worker is still
adding links (the notes measured one worker draining the queue while the
other closed). RedisSpider keeps a worker alive forever instead. Here a worker
stays open (DontCloseSpider on spider_idle) until the shared queue has been
empty and no worker has received a response for BASELINE_IDLE_CLOSE_SECONDS.
"""

from __future__ import annotations

import time
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy_redis.connection import get_redis_from_settings

from spiders.web import WebSpider

ACTIVITY_EVERY = 0.5  # seconds between this worker's activity stamps


class RedisWebSpider(WebSpider):
    name = "redisweb"

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> RedisWebSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.server = get_redis_from_settings(settings)
        key = settings.get("SCHEDULER_QUEUE_KEY", "%(spider)s:requests")
        spider.queue_key = key % {"spider": spider.name}
        spider.activity_key = f"{spider.name}:last_activity"
        spider.idle_close = settings.getfloat("BASELINE_IDLE_CLOSE_SECONDS", 3.0)
        spider._stamped = 0.0
        crawler.signals.connect(spider._on_response, signals.response_received)
        crawler.signals.connect(spider._on_idle, signals.spider_idle)
        return spider

    def _stamp(self) -> None:
        now = time.time()
        self.server.set(self.activity_key, repr(now))
        self._stamped = now

    def _on_response(self, **_: Any) -> None:
        if time.time() - self._stamped >= ACTIVITY_EVERY:
            self._stamp()

    def _queue_len(self) -> int:
        kind = self.server.type(self.queue_key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "zset":
            return int(self.server.zcard(self.queue_key))
        if kind == "list":
            return int(self.server.llen(self.queue_key))
        return 0

    def _on_idle(self, spider: Any = None) -> None:
        if self._queue_len():
            raise DontCloseSpider  # the engine pulls again at its next heartbeat
        raw = self.server.get(self.activity_key)
        last = float(raw) if raw else 0.0
        if not last:
            self._stamp()
            raise DontCloseSpider
        if time.time() - last < self.idle_close:
            raise DontCloseSpider
