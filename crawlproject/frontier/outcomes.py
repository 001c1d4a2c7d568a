"""How a worker's components report an outcome the frontier must act on.

* :class:`ItemNotSaved`: the contract between item pipelines (ours or a
  user's) and the frontier's acknowledgements (middlewares/frontier_ack.py);
* the spider close reasons of a failed worker, on which ``scrapy crawl``
  exits 1 (crawlproject/commands/crawl.py), so that Scrapyd, systemd or a
  shell loop does not take a broken worker for a finished crawl.
"""

from __future__ import annotations

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
