"""Scrapy's own scheduling settings, with the frontier in the scheduler's place.

Scrapy's scheduler reads ``DEPTH_PRIORITY`` (through DepthMiddleware, as
``Request.priority``), ``SCHEDULER_DISK_QUEUE``, ``SCHEDULER_MEMORY_QUEUE``,
``SCHEDULER_PRIORITY_QUEUE`` and ``JOBDIR``; here the frontier replaces it.
A spider's settings keep their meaning where the frontier does the same
(its order is breadth-first by depth within a host, then by
``Request.priority``: crawlproject/frontier/admission/priority.py), and one INFO line
says so; an order it cannot keep (depth-first: a negative DEPTH_PRIORITY,
LIFO queues, a queue class of one's own) is refused at start with one
ConfigError line, not run in another order than asked.

``refuse_scrapy_scheduling`` runs in ``scrapy crawl``'s start check (one
line, exit status 1, before the crawl: crawlproject/commands/crawl.py);
``checked_scheduling`` once per worker, when the scheduler is made (refusing
again, for a crawl started otherwise, then the INFO lines).
"""

from __future__ import annotations

import logging

from scrapy.settings import BaseSettings

from crawlproject.given import is_given
from crawlproject.setting_values import ConfigError

logger = logging.getLogger(__name__)

QUEUE_SETTINGS = ("SCHEDULER_DISK_QUEUE", "SCHEDULER_MEMORY_QUEUE")
FIFO_QUEUES = frozenset(
    {
        "scrapy.squeues.PickleFifoDiskQueue",
        "scrapy.squeues.MarshalFifoDiskQueue",
        "scrapy.squeues.FifoMemoryQueue",
    }
)
# Both order by Request.priority, as the frontier does within a host; the
# downloader-aware one spreads requests over downloader slots, which the
# frontier's per-host claims do fleet-wide.
PRIORITY_QUEUES = frozenset(
    {"scrapy.pqueues.ScrapyPriorityQueue", "scrapy.pqueues.DownloaderAwarePriorityQueue"}
)
CLOSESPIDER_SETTINGS = (
    "CLOSESPIDER_PAGECOUNT",
    "CLOSESPIDER_ITEMCOUNT",
    "CLOSESPIDER_TIMEOUT",
    "CLOSESPIDER_ERRORCOUNT",
    "CLOSESPIDER_TIMEOUT_NO_ITEM",
    "CLOSESPIDER_PAGECOUNT_NO_ITEM",
)
ORDER = "it crawls each host breadth-first: by depth, then Request.priority"
DEPTH_FIRST = "asks for depth-first order, which the shared frontier does not keep"


def _path(settings: BaseSettings, name: str) -> str:
    value = settings.get(name)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


def refuse_scrapy_scheduling(settings: BaseSettings) -> None:
    """ConfigError (one line) for a Scrapy scheduling setting whose order the
    frontier cannot keep."""
    if settings.getint("DEPTH_PRIORITY") < 0:
        value = settings.get("DEPTH_PRIORITY")
        raise ConfigError(f"DEPTH_PRIORITY={value} {DEPTH_FIRST} ({ORDER}); remove it")
    for name in (*QUEUE_SETTINGS, "SCHEDULER_PRIORITY_QUEUE"):
        if not is_given(settings, name):
            continue
        path = _path(settings, name)
        if path in (FIFO_QUEUES if name in QUEUE_SETTINGS else PRIORITY_QUEUES):
            continue
        if "Lifo" in path:
            raise ConfigError(f"{name}={path}: a LIFO queue {DEPTH_FIRST} ({ORDER}); remove it")
        raise ConfigError(
            f"{name}={path}: Scrapy's scheduler and its queues are replaced by the shared "
            f"frontier ({ORDER}; CRAWL_PRIORITY_POLICY sets another order); remove it"
        )


def checked_scheduling(settings: BaseSettings) -> BaseSettings:
    """``settings``, once refused or explained (refuse_scrapy_scheduling,
    log_scrapy_scheduling)."""
    refuse_scrapy_scheduling(settings)
    log_scrapy_scheduling(settings)
    return settings


def log_scrapy_scheduling(settings: BaseSettings) -> None:
    """One INFO line for each kind of Scrapy scheduling setting given that
    keeps its meaning (or has one of its own) with the frontier."""
    names = ("DEPTH_PRIORITY", *QUEUE_SETTINGS, "SCHEDULER_PRIORITY_QUEUE")
    ordering = [n for n in names if is_given(settings, n)]
    if ordering:
        logger.info(
            "%s: kept, as Scrapy's breadth-first recipe asks: the shared frontier replaces "
            "Scrapy's scheduler and its queues, and %s, across the fleet",
            ", ".join(ordering),
            ORDER,
        )
    closing = [f"{n}={settings.get(n)}" for n in CLOSESPIDER_SETTINGS if settings.getfloat(n) > 0]
    if closing:
        logger.info(
            "%s: this worker counts its own and closes alone; what it holds goes back "
            "to the frontier and the crawl goes on (or resumes)",
            ", ".join(closing),
        )
    jobdir = settings.get("JOBDIR")
    if jobdir:
        logger.info(
            "JOBDIR=%s keeps this worker's spider.state only (Scrapy's SpiderState); the "
            "crawl's requests and seen URLs are in the frontier, which resumes without it",
            jobdir,
        )
