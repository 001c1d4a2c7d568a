"""The lines a worker logs when its frontier opens, or cannot open."""

from __future__ import annotations

import logging

from crawlproject.frontier.client import FrontierMismatch
from crawlproject.frontier.config import FrontierConfig
from crawlproject.frontier.crawl_redis import CrawlRedis, redacted
from crawlproject.frontier.embedded import EmbeddedRedisError
from crawlproject.frontier.fresh_start import StartRefused
from crawlproject.frontier.outage import OUTAGE_ERRORS

logger = logging.getLogger("crawlproject.frontier.scheduler")  # where operators grep for them

# Why a frontier cannot open: its Redis (down, refused, a cluster that is not
# ready), the embedded Redis, a crawl of another layout, a bad setting.
OPEN_ERRORS: tuple[type[BaseException], ...] = (
    *OUTAGE_ERRORS,
    EmbeddedRedisError,
    FrontierMismatch,
    ValueError,
)


def log_open_failure(config: FrontierConfig, exc: BaseException) -> None:
    if isinstance(exc, StartRefused):  # the frontier is there; this start must not be
        logger.error("Not started: %s", exc)
        return
    url = config.redis_url
    logger.error(
        "Cannot open the frontier (%s at %s): %s",
        type(exc).__name__,
        "the embedded Redis" if url is None else redacted(url),
        exc,
    )


def log_opened(config: FrontierConfig, crawl: str, worker_id: str, shared: CrawlRedis) -> None:
    logger.info(
        "Frontier open: crawl %r, worker %s, %s, delay %.3f s, %d slot(s) per host",
        crawl,
        worker_id,
        "embedded Redis" if shared.embedded else "shared Redis",
        config.host_delay_seconds,
        config.host_concurrency,
    )
