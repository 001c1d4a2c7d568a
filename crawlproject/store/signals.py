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

redirect_received = object()

# ``render_resource_received``: a response a rendered page's browser received
# (a script, an XHR's JSON, an image...), fetched by the worker for it
# (middlewares/render_handler.py), with ``exchange``: a
# :class:`~crawlproject.store.warc.HttpExchange`. The storage pipeline writes
# it like a redirect hop, so the page can be replayed as it was seen.
render_resource_received = object()
