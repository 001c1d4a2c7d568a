"""The soft-404 probe as a worker runs it, for middlewares/dedupe.py.

crawlproject/dedupe/soft404.py holds the states and the fleet's Redis hash of
them; here: a host's state when one of its pages is judged, the probe request
the fleet's first worker to suspect the host queues (``trap/soft404_probes``),
and the host's verdict from the probe's answer (``trap/soft404_hosts`` when it
answered 2xx). A Redis error is counted (``dedupe/redis_error``) and logged,
never raised: the page is then judged without the host's state.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from redis.exceptions import RedisError
from scrapy import Request
from scrapy.http import Response

from crawlproject.body_digest import body_sha1
from crawlproject.dedupe.soft404 import PROBE_META_KEY, NotFoundPage, Soft404Registry, probe_url
from crawlproject.frontier.basics.request_meta import SCOPE_META_KEY
from crawlproject.frontier.scrapy_glue.frontier_lookup import crawl_redis_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# A probe goes to its host's best band: the sooner the verdict, the fewer trap
# pages fetched before it (depth - priority, clamped to band 0).
PROBE_PRIORITY = 64


class Soft404Probes:
    """A worker's side of the fleet's soft-404 probes (CRAWL_SOFT404_PROBE)."""

    def __init__(self, crawler: Crawler, stats: StatsCollector, enabled: bool) -> None:
        self.crawler = crawler
        self.stats = stats
        self.enabled = enabled
        self._registry: Soft404Registry | None = None

    async def state(self, host: str, fresh: bool) -> NotFoundPage | str | None:
        """The host's state (see soft404.host_state); None when probing is off,
        the host unknown or its state cannot be read."""
        if not self.enabled or not host:
            return None
        try:
            return await self.registry().state(host, fresh)
        except RedisError as exc:
            self.stats.inc_value("dedupe/redis_error")
            logger.warning("Soft-404 state of %s unknown (%s)", host, exc)
            return None

    async def probe_for(self, response: Response, host: str) -> Request | None:
        """The host's probe, if this worker is the fleet's first to suspect it."""
        try:
            if not await self.registry().claim(host):
                return None
        except RedisError as exc:
            self.stats.inc_value("dedupe/redis_error")
            logger.warning("Soft-404 probe of %s not claimed (%s)", host, exc)
            return None
        self.stats.inc_value("trap/soft404_probes")
        source = response.request
        url = probe_url(response.url)
        logger.debug("%s: a suspect page (%s): probing %s", host, response.url, url)
        return Request(
            url,
            callback=source.callback if source is not None else None,
            errback=source.errback if source is not None else None,
            priority=PROBE_PRIORITY,
            meta={
                PROBE_META_KEY: True,
                # Its status is the answer: no HttpError, no redirect followed.
                "handle_httpstatus_all": True,
                "depth": int(response.meta.get("depth", 0)) + 1,
                SCOPE_META_KEY: response.meta.get(SCOPE_META_KEY),
            },
        )

    async def answered(self, response: Response, host: str, echoless: int | None) -> None:
        """Stores the host's verdict from its probe's answer; ``echoless``: the
        SimHash of the answer's text without its echo (None: not HTML)."""
        page = None
        if 200 <= response.status < 300:
            page = NotFoundPage(echoless, body_sha1(response).hex(), response.url)
            self.stats.inc_value("trap/soft404_hosts")
            logger.info(
                "%s answers a path that cannot exist with %d (a soft-404 space): its pages "
                "like %s are not kept and their links not followed",
                host,
                response.status,
                response.url,
            )
        try:
            await self.registry().answer(host, page)
        except RedisError as exc:
            self.stats.inc_value("dedupe/redis_error")
            logger.warning("Soft-404 verdict of %s not stored (%s)", host, exc)

    def registry(self) -> Soft404Registry:
        if self._registry is None:
            shared = crawl_redis_of(self.crawler)
            assert shared is not None, "the frontier opens before any response"
            self._registry = Soft404Registry(shared.redis, shared.keys.soft404)
        return self._registry
