"""Fetching one origin's robots.txt with the politeness slot a request holds.

The robots.txt middleware (middlewares/robotstxt.py) decides when: one worker
of the fleet, holding the fetch lock and the host's slot. Here: the GET through
the engine (one request per attempt, no retry), up to
``CRAWL_ROBOTS_MAX_REDIRECTS`` redirects followed the host's delay apart (RFC
9309 2.3.1.2), and what came back as a :class:`FetchOutcome`. Any failure to
get an answer means "unreachable"; a host whose own address the guard refuses
raises the guard's ``BlockedAddress``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.httpobj import urlparse_cached

from crawlproject.frontier.claims.retry_after import retry_after_seconds
from crawlproject.guard.errors import BlockedAddress, refusal_of
from crawlproject.robots.config import RobotsConfig
from crawlproject.robots.policy import FetchOutcome, truncate

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

ROBOTS_META_KEY = "crawl_robots"  # marks the robots.txt request itself


@dataclass(frozen=True, slots=True)
class Fetched:
    """This request's slot served a robots.txt fetch (``at``: loop time of the answer)."""

    at: float
    outcome: FetchOutcome
    latency: float | None


class RobotsFetcher:
    """GETs robots.txt through the crawler's engine; stats ``robotstxt/...``.
    ``redirect_statuses``: the answers followed as redirects (the middleware
    passes crawlproject/limits.py's, a sibling of this package)."""

    def __init__(
        self,
        crawler: Crawler,
        config: RobotsConfig,
        stats: StatsCollector,
        redirect_statuses: Collection[int],
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = stats
        self.redirect_statuses = redirect_statuses

    async def fetch(self, origin: str, delay_seconds: float) -> Fetched:
        """GET robots.txt, following up to CRAWL_ROBOTS_MAX_REDIRECTS redirects
        (RFC 9309 2.3.1.2), the host's delay apart: the slot is still ours."""
        url = origin + "/robots.txt"
        loop = asyncio.get_running_loop()
        for hop in range(self.config.max_redirects + 1):
            if hop:
                await asyncio.sleep(delay_seconds)
            response, outcome = await self._get(url, first=not hop)
            at = loop.time()
            location = response.headers.get(b"Location") if response is not None else None
            if response is None or response.status not in self.redirect_statuses or not location:
                break
            url = response.urljoin(location.decode("latin-1"))
            self.stats.inc_value("robotstxt/redirects")
        else:
            # More redirects than allowed: "unavailable" (RFC 9309 2.3.1.2).
            self.stats.inc_value("robotstxt/redirects_exhausted")
            outcome = FetchOutcome(status=0, redirects_exhausted=True, error="too many redirects")
        latency: float | None = None
        if response is not None:
            raw = response.meta.get("download_latency")
            latency = float(raw) if isinstance(raw, int | float) else None
            if 200 <= response.status < 300 and truncate(response.body, self.config.max_bytes)[1]:
                self.stats.inc_value("robotstxt/truncated")
                logger.info(
                    "robots.txt of %s is %d bytes: only the first %d are parsed",
                    origin,
                    len(response.body),
                    self.config.max_bytes,
                )
        if outcome.error is not None:
            logger.info("robots.txt of %s: no answer (%s)", origin, outcome.error)
        return Fetched(at, outcome, latency)

    async def _get(self, url: str, first: bool = True) -> tuple[Response | None, FetchOutcome]:
        engine = self.crawler.engine
        assert engine is not None
        robots_request = Request(
            url,
            callback=NO_CALLBACK,
            dont_filter=True,
            meta={
                ROBOTS_META_KEY: True,
                "dont_obey_robotstxt": True,
                # One request per attempt: retries and redirects would skip
                # the host's delay; redirects are followed by fetch.
                "dont_retry": True,
                "dont_redirect": True,
                "handle_httpstatus_all": True,
            },
        )
        self.stats.inc_value("robotstxt/request_count")
        try:
            response: Response = await engine.download_async(robots_request)
        except Exception as exc:
            host = urlparse_cached(robots_request).hostname or "?"
            refused = refusal_of(exc, host)
            if refused is not None and first:
                # The host's own address is refused: so is every URL of it.
                raise BlockedAddress(host, refused) from exc
            if refused is None and not isinstance(exc, IgnoreRequest):
                # Any failure to get an answer means "unreachable".
                self.stats.inc_value(f"robotstxt/exception_count/{type(exc).__name__}")
                return None, FetchOutcome(status=0, error=f"{type(exc).__name__}: {exc}")
            # Another middleware refused it (or the guard a redirect): nothing to obey.
            self.stats.inc_value("robotstxt/ignored")
            return None, FetchOutcome(status=0, redirects_exhausted=True, error=str(exc))
        self.stats.inc_value(f"robotstxt/response_status_count/{response.status}")
        return response, FetchOutcome(
            status=response.status,
            body=response.body,
            retry_after_seconds=retry_after_seconds(response.headers.get(b"Retry-After")),
        )
