"""How a worker's components report an outcome the frontier must act on.

* :class:`NotFetched` (with :class:`Requeue`): a downloader middleware will
  not fetch a claimed URL now (robots.txt); the lease path
  (crawlproject/frontier/claims/leases.py ``LeaseBook.failed``) turns it into a
  requeue, a slot freed unfetched, or a finished URL;
* :class:`ItemNotSaved`: the contract between item pipelines (ours or a
  user's) and the frontier's acknowledgements (middlewares/frontier_ack.py);
* the spider close reasons of a failed worker, on which ``scrapy crawl``
  exits 1 (crawlproject/commands/crawl.py), so that Scrapyd, systemd or a
  shell loop does not take a broken worker for a finished crawl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrapy.exceptions import IgnoreRequest

# Spider close reasons of a failed worker.
FRONTIER_UNAVAILABLE = "frontier_unavailable"  # could not open the frontier
FRONTIER_ERROR = "frontier_error"  # the frontier failed mid-crawl
ITEM_NOT_SAVED = "item_not_saved"  # a pipeline could not save an item (ItemNotSaved)
FAILED_FINISH_REASONS = frozenset({FRONTIER_UNAVAILABLE, FRONTIER_ERROR, ITEM_NOT_SAVED})


class ItemNotSaved(Exception):
    """Raise from an item pipeline's ``process_item`` when the item could not
    be saved for a reason that is not the item's own: a failing disk, a
    database that is down, a store that refuses every write.

    The page the item came from is then *not* acknowledged as done: its URL
    goes back to the frontier, at the head of its host's queue, and the worker
    stops with the close reason ``item_not_saved`` (``scrapy crawl`` exits 1),
    since nothing it fetched afterwards could be saved either. Another worker,
    or this one once restarted (after the cause is fixed), fetches the page
    again: nothing is lost.

    Any other exception from a pipeline (a bug, an item it cannot handle)
    still finishes the URL: an item that always fails must not be fetched
    again and again. The message should name the item and the cause; it is
    logged once per page.
    """


@dataclass(frozen=True, slots=True)
class Requeue:
    """Give the claimed URL back to the head of its host queue, unfetched: its
    slot was used for something else (``contacted_at``: loop time the host
    last answered, e.g. its robots.txt, which took ``fetch_seconds``;
    ``throttled``: with a back-off status) or the host must be left alone for
    ``hold_seconds``."""

    hold_seconds: float = 0.0
    contacted_at: float | None = None
    fetch_seconds: float | None = None
    throttled: bool = False


class NotFetched(IgnoreRequest):
    """Raised by a downloader middleware for a claimed URL it does not fetch.

    ``requeue``: the URL goes back to its queue and is fetched later (if the
    request still holds its host's slot here; else it is finished).
    ``unfetched``: no contact with the host was made, so its slot is freed at
    once (its next URL need not wait a delay); the URL is then finished.
    Neither: the URL is finished as a failed fetch.
    """

    def __init__(self, *args: Any, requeue: Requeue | None = None, unfetched: bool = False) -> None:
        super().__init__(*args)
        self.requeue = requeue
        self.unfetched = unfetched
