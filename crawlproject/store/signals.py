"""The storage's crawler signals.

``redirect_received``: a 3xx answer that RedirectMiddleware is about to follow
has just been received (sent by middlewares/redirect_hops.py, with ``hop``: a
:class:`~crawlproject.store.hops.Hop`). The storage pipeline
(pipelines/store.py) writes it to the WARC file at once, so it is archived
whatever becomes of its target. Sent with ``send_catch_log_async``: the
redirect is followed only once the handlers are done, so its record comes
before its target's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.http import Response

from crawlproject.store.config import RESPONSE_ITEM_KEY

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

redirect_received = object()

# ``render_resource_received``: a response a rendered page's browser received
# (a script, an XHR's JSON, an image...), fetched by the worker for it
# (middlewares/render_handler.py), with ``exchange``: a
# :class:`~crawlproject.store.warc.HttpExchange`. The storage pipeline writes
# it like a redirect hop, so the page can be replayed as it was seen.
render_resource_received = object()

# ``dropped_item_response``: the response an item carried for the store
# (``RESPONSE_ITEM_KEY``), the item dropped by the duplicate filter before any
# pipeline (middlewares/dedupe.py: an exact copy's items,
# ``CRAWL_DEDUPE_DROP_ITEMS``), with ``response`` and ``fetched_at`` (the
# item's own, or None). The storage pipeline writes the page as it would have
# for the item (an exact copy: a revisit of the stored original), so the
# verdict never takes a page out of the archive; without a store, nothing
# receives it. Sent with ``send_catch_log_async``: written before the filter
# moves on, so before the page's lease is acked.
dropped_item_response = object()


async def archive_dropped_item(crawler: Crawler, item: Any) -> None:
    """Sends ``dropped_item_response`` for an item dropped before the pipelines
    when it carries a response for the store; the item is left as it is."""
    adapter = ItemAdapter(item)
    response = adapter.get(RESPONSE_ITEM_KEY)
    if isinstance(response, Response):
        await crawler.signals.send_catch_log_async(
            signal=dropped_item_response, response=response, fetched_at=adapter.get("fetched_at")
        )
