"""Scrapy's engine, touched here and nowhere else: the two things the frontier
needs from it that Scrapy 2.19 offers no public way to do.

* **The end of a request** (:func:`watch_request_ends`): where a claimed URL's
  lease ends, whatever the spider. Scrapy's public signals each see one step:
  ``request_left_downloader`` and ``response_received`` come before the
  callback ran, ``item_scraped``/``item_dropped``/``item_error`` per item,
  ``spider_error`` only for a callback that raised, and a failure with no
  errback sends none. Only the engine knows when it is done: for every request
  it takes from the scheduler, ``ExecutionEngine._start_scheduled_request``
  chains ``_download`` (every downloader middleware), then
  ``_handle_downloader_output`` (a Request returned by a middleware, a redirect
  or a retry, is handed to the scheduler; a response or a failure waits in
  ``Scraper.enqueue_scrape`` until the callback or errback ran, its output went
  through the spider middlewares, every request it yielded was scheduled and
  every item left the item pipelines), then ``_remove_request``, which calls
  ``engine._slot.remove_request``, once per request on every path
  (``engine.download_async``, i.e. robots.txt, calls it too). This module wraps
  that one method, on the running engine slot object only (Scrapy's engine._slot).
* **Waking the engine** (:func:`wake_engine`): after the scheduler's
  ``next_request()`` returned None, the engine asks again only when a download
  finishes, a request is crawled, or its 5 s heartbeat fires; on a delay-bound
  crawl the heartbeat would set the pace. No public call schedules a poll
  (``engine.unpause()`` does not; ``engine.crawl()`` needs a request), so this
  reaches ``engine._slot.nextcall.schedule()`` (a CallLaterOnce: a pending
  call is not duplicated).

The fence: :func:`check_engine` runs when the frontier opens, before it
connects anywhere, and refuses a Scrapy whose engine lacks either hook with one
line (``Not started: this Scrapy (X.Y.Z) lacks ...``, close reason
``frontier_unavailable``, exit 1). A hook that fails at run time stops the
worker with one ERROR line and the close reason ``frontier_error`` (exit 1):
never only logged, since a lease whose end is missed would be renewed for as
long as the worker lives. tests/test_scrapy_private_api.py pins the engine's
order above and runs the check against every Scrapy the requirements allow.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy import Request

from crawlproject.frontier.basics.outcomes import FRONTIER_ERROR
from crawlproject.frontier.crawl.fresh_start import StartRefused
from crawlproject.frontier.scrapy_glue.background_loops import close_or_exit

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

SUPPORTED = "2.19.x"  # requirements.txt's pin

# (the request the engine is finished with, every request it still holds,
# that one included)
RequestEnded = Callable[[Request, Collection[Request]], None]

_stopping: weakref.WeakSet[Any] = weakref.WeakSet()  # engines told to stop, once each
_closers: set[asyncio.Future[None]] = set()  # kept referenced until they are done


class EngineMisfit(StartRefused):
    """The running Scrapy's engine lacks a hook this module needs."""


def misfit(engine: object) -> str | None:
    """What ``engine`` lacks for the hooks (the first thing), or None."""
    engine_slot = getattr(engine, "_slot", None)
    if engine_slot is None:
        return "engine._slot"
    if not callable(getattr(engine_slot, "remove_request", None)):
        return "engine._slot.remove_request"
    if not isinstance(getattr(engine_slot, "inprogress", None), set):
        return "engine._slot.inprogress (a set)"
    if not callable(getattr(getattr(engine_slot, "nextcall", None), "schedule", None)):
        return "engine._slot.nextcall.schedule"
    return None


def misfit_line(what: str) -> str:
    return (
        f"this Scrapy ({scrapy.__version__}) lacks {what}: "
        f"crawlproject supports Scrapy {SUPPORTED} (requirements.txt)"
    )


def check_engine(crawler: Crawler) -> None:
    """Raises :class:`EngineMisfit` (one line) unless the crawler's open
    engine has both hooks in the shape this module uses."""
    lacking = misfit(crawler.engine)
    if lacking is not None:
        raise EngineMisfit(misfit_line(lacking))


def watch_request_ends(crawler: Crawler, ended: RequestEnded, outage_seconds: float) -> None:
    """Calls ``ended`` each time the crawler's engine is finished with a
    request, just before it forgets it. Checked first (:func:`check_engine`);
    ``ended`` raising stops the worker (:func:`stop_worker`, within the
    scheduler's ``outage_seconds``)."""
    check_engine(crawler)
    engine_slot: Any = getattr(crawler.engine, "_slot", None)
    remove, in_progress = engine_slot.remove_request, engine_slot.inprogress

    def remove_request(request: Request) -> None:
        try:
            ended(request, in_progress)
        except Exception as exc:
            stop_worker(crawler, f"ending the lease of {request.url}", exc, outage_seconds)
        finally:
            remove(request)  # the engine's own bookkeeping happens in any case

    engine_slot.remove_request = remove_request


def wake_engine(crawler: Crawler, outage_seconds: float) -> bool:
    """Asks the engine to poll the scheduler on the next reactor turn; False
    when it has no open spider (before its open, after its close)."""
    engine_slot = getattr(crawler.engine, "_slot", None)
    if engine_slot is None:
        return False
    try:
        engine_slot.nextcall.schedule()
    except Exception as exc:  # AttributeError included: an engine slot of another shape
        what = "waking Scrapy's engine (engine._slot.nextcall.schedule)"
        stop_worker(crawler, what, exc, outage_seconds)
        return False
    return True


def stop_worker(crawler: Crawler, what: str, exc: BaseException, outage_seconds: float) -> None:
    """One ERROR line, then the spider closes with ``frontier_error`` (exit 1);
    its leases go back as on any close, or the process exits past
    ``outage_seconds`` (the scheduler's bound, read once: background_loops.py
    close_or_exit). Once per engine."""
    engine = crawler.engine
    if engine is None or engine in _stopping:
        return
    _stopping.add(engine)
    logger.error(
        "Stopping the worker (%s): %s failed (%s: %s); its leases go back to the frontier. "
        "Run with LOG_LEVEL=DEBUG for the traceback, and report it (Scrapy %s)",
        FRONTIER_ERROR,
        what,
        type(exc).__name__,
        exc,
        scrapy.__version__,
    )
    logger.debug("The hook's failure", exc_info=exc)
    closer = close_or_exit(engine, FRONTIER_ERROR, outage_seconds)
    _closers.add(closer)
    closer.add_done_callback(_closers.discard)
