"""The engine's own end of a request: where a claimed URL's lease ends, whatever
the spider.

Scrapy 2.19 sends no signal when it is finished with a request, yet its engine
knows the moment: for every request it takes from the scheduler,
``ExecutionEngine._start_scheduled_request`` chains ``_download`` (every
downloader middleware), then ``_handle_downloader_output`` (a Request returned
by a middleware, a redirect or a retry, is crawled, i.e. handed to the
scheduler; a response or a failure waits in ``Scraper.enqueue_scrape`` until
the callback or errback ran, its whole output went through the spider
middlewares, every request it yielded was scheduled and every item it yielded
left the item pipelines), then ``_remove_request``, which calls the slot's
``remove_request``. That call comes once per request on every path: a response,
a failure with or without an errback (Scrapy's Scraper logs a failure that has
no errback and sends no signal), an exception from a downloader middleware's
``process_request``, ``process_response`` or ``process_exception``, from a
spider middleware, a callback or an errback. ``engine.download_async``
(robots.txt) calls it too, for its own requests.

:func:`watch_request_ends` wraps that one method of the engine's slot, on the
slot object only. tests/test_scrapy_private_api.py pins the order above
against the installed Scrapy, so an upgrade that changes it fails there, by
name. Without the wrapper (it logs why) a request that fails where no ack
reaches it would keep its lease, renewed for as long as the worker lives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from scrapy import Request

logger = logging.getLogger(__name__)

# (the request the engine is finished with, every request it still holds,
# that one included)
RequestEnded = Callable[[Request, Collection[Request]], None]


def watch_request_ends(engine: object, ended: RequestEnded) -> bool:
    """Calls ``ended`` each time ``engine`` is finished with a request, just
    before it forgets it. Returns False (and logs an error) if the engine
    has not the slot this relies on."""
    slot = getattr(engine, "_slot", None)
    remove = getattr(slot, "remove_request", None)
    in_progress = getattr(slot, "inprogress", None)
    if slot is None or not callable(remove) or not isinstance(in_progress, set):
        logger.error(
            "Scrapy's engine has no _slot.remove_request/inprogress (a Scrapy other than "
            "2.19?): a request that fails where no ack reaches it keeps its lease "
            "(see crawlproject/frontier/request_ends.py)"
        )
        return False

    def remove_request(request: Request) -> None:
        try:
            ended(request, in_progress)
        except Exception:  # never in the way of the engine's own bookkeeping
            logger.exception("Could not end the lease of %s", request)
        finally:
            remove(request)

    slot.remove_request = remove_request
    return True
