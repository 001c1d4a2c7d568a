"""The lines a worker logs when its frontier opens, or cannot open."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.settings import BaseSettings

from crawlproject.frontier.connection.embedded import EmbeddedRedisError
from crawlproject.frontier.connection.outage import cause_of, outage_started
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.crawl.crawl_name import CrawlName
from crawlproject.frontier.crawl.crawl_redis import CrawlRedis
from crawlproject.frontier.crawl.fresh_start import StartRefused
from crawlproject.frontier.crawl.redis_settings import from_environment
from crawlproject.frontier.store.redis_frontier import FrontierMismatch
from crawlproject.given import is_given
from crawlproject.redis_calls import OUTAGE_ERRORS
from crawlproject.security.redaction import redact
from crawlproject.setting_values import crawl_setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger("crawlproject.frontier.scheduler")  # where operators grep for them

# Why a frontier cannot open: its Redis (down, refused, a cluster that is not
# ready), the embedded Redis, a crawl of another layout, a bad setting.
OPEN_ERRORS: tuple[type[BaseException], ...] = (
    *OUTAGE_ERRORS,
    EmbeddedRedisError,
    FrontierMismatch,
    ValueError,
)


def log_open_failure(
    config: FrontierConfig, exc: BaseException, crawler: Crawler | None = None
) -> None:
    """One ERROR line: why the frontier cannot open; with ``crawler``, logged
    when the engine has stopped (the log's last line)."""
    if isinstance(exc, StartRefused):  # the frontier is there; this start must not be
        logger.error("Not started: %s", exc)
        return
    url = config.redis_url
    where = "the embedded Redis" if url is None else redact(url, [])
    line = ("Cannot open the frontier (%s at %s): %s", type(exc).__name__, where, why(exc))
    if crawler is None:
        logger.error(*line)
        return

    # Said last, after Scrapy's "Spider closed (frontier_unavailable)" and its
    # stats: the line a user reads at the end of the log says what went wrong.
    def say(*_: Any, **__: Any) -> None:
        logger.error(*line)

    crawler.signals.connect(say, signal=signals.engine_stopped, weak=False)


def why(exc: BaseException) -> str:
    """The failure's words: for a Redis that could not be reached, the cause
    and how long the start waited for it (outage.py), then redis-py's text."""
    if not isinstance(exc, OUTAGE_ERRORS):
        return str(exc)
    now = time.monotonic()
    waited = now - outage_started(exc, now)
    after = f", after waiting {waited:.0f} s" if waited >= 1 else ""
    return f"{cause_of(exc)}{after} ({exc})"


def log_opened(config: FrontierConfig, crawl: str, worker_id: str, shared: CrawlRedis) -> None:
    logger.info(
        "Frontier open: crawl %r, worker %s, %s, delay %.3f s, %d slot(s) per host",
        crawl,
        worker_id,
        "embedded Redis" if shared.embedded else "shared Redis",
        config.host_delay_seconds,
        config.host_concurrency,
    )


def sources_line(
    settings: BaseSettings, url: str | None, source: str, crawl: CrawlName, data_dir: str
) -> str:
    """One line for the start's log: which Redis (password masked) and where
    the crawl's name (crawl_name.py) and data folder came from."""
    if url is None:
        redis = "the embedded Redis (no REDIS_URL setting or environment variable, no REDIS_HOST)"
    else:
        redis = f"{redact(url, [])} from {source}"
    folder = (
        "spider argument" if data_dir != crawl_setting(settings, "CRAWL_DATA_DIR")
        else "environment" if from_environment(settings, "CRAWL_DATA_DIR")
        else "setting" if is_given(settings, "CRAWL_DATA_DIR") else "default"
    )  # fmt: skip
    return (
        f"Redis: {redis}; CRAWL_NAME={crawl.name!r} ({crawl.source}), "
        f"CRAWL_DATA_DIR={data_dir!r} ({folder})"
    )
