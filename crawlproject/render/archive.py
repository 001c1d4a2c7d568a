"""The raw document behind a rendered response, for the archive.

The spider gets the rendered DOM (its links and text); the WARC file gets the
document as the server sent it, with the page's subresources beside it
(``render_resource_received``, crawlproject/store/signals.py), so that a
replay runs the page's scripts again. Kept per response object, in this
process only (a weak map: gone with the response).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from scrapy.http import Response

RENDERED_FLAG = "rendered"
_RAW: WeakKeyDictionary[Response, Response] = WeakKeyDictionary()


def keep_raw(rendered: Response, raw: Response) -> None:
    _RAW[rendered] = raw


def archived_response(response: Response) -> Response:
    """What the archive stores for ``response``: its raw document if it was rendered."""
    return _RAW.get(response, response)
