"""A page's duplicate verdict: the response's, never an item's.

middlewares/dedupe.py judges a response (at the first item its callback yields)
and keeps the verdict in ``response.meta[VERDICT_META_KEY]``, where anything
that handles the response later may read it. No field is added to a spider's
items, with one exception a spider asks for: a spider whose class sets
``fetch_records = True`` (the ``web`` spider) yields, first for each response,
its own record of that fetch (spiders/records.py), and that record gets
``record_fields``: the body's SHA-1, the SimHash and, for a duplicate, what it
copies. pipelines/dedupe.py drops such a record when it is a duplicate's.

Also here: what the verdict does to the page's links (``Links``, ``Outcome``),
and the count of near copies a chain of links passed (``NEAR_COPY_HOPS``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter

from crawlproject.dedupe.config import FOLLOW_ALL, FOLLOW_NONE

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

VERDICT_META_KEY = "crawl_dedupe"
# The spider attribute by which a spider says its first item for a response is
# that response's fetch record (the record gets the verdict's fields).
FETCH_RECORDS_ATTR = "fetch_records"
SIMHASH_HEX_CHARS = 16
EXACT, NEAR = "exact", "near"


@dataclass(frozen=True, slots=True)
class PageVerdict:
    content_sha1: str  # hex
    simhash: int | None  # None: not fingerprinted (a content type, too little text)
    kind: str | None = None  # EXACT, NEAR, or None: not a duplicate
    duplicate_of: str | None = None  # the original's URL, when recorded
    distance: int | None = None

    def record_fields(self) -> dict[str, Any]:
        """The fields a fetch record gets (the names the store, the recrawl
        tracker and the dedupe pipeline read)."""
        fields: dict[str, Any] = {"content_sha1": self.content_sha1}
        if self.simhash is not None:
            fields["simhash"] = f"{self.simhash:0{SIMHASH_HEX_CHARS}x}"
        if self.kind is not None:
            fields["dedupe"] = self.kind
            fields["duplicate_of"] = self.duplicate_of
            fields["dedupe_distance"] = self.distance
        return fields


class Links(enum.Enum):
    FOLLOW = "follow"
    LOWER = "lower"  # followed after the originals' own links
    DROP = "drop"


@dataclass(frozen=True, slots=True)
class Outcome:
    links: Links
    probe: Request | None = None
    novel: bool = True  # it brought new content (the depth guard's count, depth_chains.py)
    content: bool | None = None  # the token guard's (token_evidence.py); None: not judged
    verdict: PageVerdict | None = None  # None: not judged (the check failed)
    drop_items: bool = False  # an exact copy's items (CRAWL_DEDUPE_DROP_ITEMS)
    near_hops: int = 0  # what its links to its own host carry (verdict.py)


def annotate(record: Any, verdict: PageVerdict) -> bool:
    """Writes the verdict into a spider's own fetch record; False if the
    record's type has no such fields (a declared ``scrapy.Item``)."""
    try:
        ItemAdapter(record).update(verdict.record_fields())
    except KeyError:
        return False
    return True


class ItemsDropped:
    """The items of exact copies, dropped (``CRAWL_DEDUPE_DROP_ITEMS``): each
    counted (``dedupe/items_dropped``), the first said at INFO with how to keep
    them, the rest not (a crawl of the web meets many copies)."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self._said = False

    def dropped(self, url: str, verdict: PageVerdict | None) -> None:
        self.stats.inc_value("dedupe/items_dropped")
        if self._said:
            return
        self._said = True
        original = verdict.duplicate_of if verdict is not None else None
        logger.info(
            "Dropped the items of %s, the same page (byte for byte) as %s: the items of "
            "an exact copy are dropped, counted in dedupe/items_dropped (said once; "
            "CRAWL_DEDUPE_DROP_ITEMS=False keeps them)",
            url,
            original or "an earlier page",
        )


# The near copies of a page of their own host whose links a chain of links
# follows, at most: a near copy's links are followed (a listing's next page under
# a long template), but its text can drift one page at a time from every page
# kept (an endless calendar whose months differ by their title), so a chain
# passes at most this many such pages; the count travels in the links' meta to
# the same host, and never goes down along a chain.
NEAR_COPY_HOPS = 10
NEAR_HOPS_META_KEY = "crawl_near_hops"


def near_hops(meta: Mapping[str, Any]) -> int:
    """The near copies of their own host a request's chain followed (0: none)."""
    hops = meta.get(NEAR_HOPS_META_KEY, 0)
    return hops if isinstance(hops, int) and hops > 0 else 0


def duplicate_links(
    follow: str, near: bool, mirror: bool, web: bool, new_content: bool, hops: int
) -> tuple[Links, int, bool]:
    """What a duplicate's links get (``follow``: CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS),
    the near-copy count its links to its own host carry, and whether the chain
    was cut here (NEAR_COPY_HOPS passed: web only, never another spider's)."""
    if follow == FOLLOW_NONE:
        return Links.DROP, hops, False
    if not (mirror or follow == FOLLOW_ALL or near):
        return Links.DROP, hops, False  # the same bytes as a page of its own host: its links
    # A near copy of a page of its host has text of its own, and links no kept
    # page may have (the next page of a listing whose long template outweighs
    # its items); the trap guards count its links, and a chain of near copies
    # that bring no new text is a drifting trap's shape for web.
    if not near or mirror or new_content:
        return Links.LOWER, hops, False
    if hops >= NEAR_COPY_HOPS and web and follow != FOLLOW_ALL:
        return Links.DROP, hops, True
    return Links.LOWER, hops + 1, False
