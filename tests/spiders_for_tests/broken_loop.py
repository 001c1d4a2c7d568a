"""A web spider whose page limit breaks the frontier's claim loop two seconds
into the crawl (a TypeError, as a bug would): the worker must close with
``frontier_error`` and exit 1, not hang in "Closing spider"."""

import time
from typing import Any

from spiders.web import WebSpider

BREAKS_AFTER_SECONDS = 2.0


class _BreakingLimit:
    """No limit at first; then the claim loop's arithmetic on it fails."""

    def __init__(self) -> None:
        self.first: float | None = None

    def __sub__(self, other: int) -> int:
        now = time.monotonic()
        self.first = self.first or now
        if now - self.first > BREAKS_AFTER_SECONDS:
            raise TypeError("a bug in the claim loop")
        return 10**9

    def __le__(self, other: int) -> bool:  # done_estimate >= max_pages: never
        return False


class BrokenLoopSpider(WebSpider):
    name = "broken_loop"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.crawl_max_pages = _BreakingLimit()  # type: ignore[assignment]
