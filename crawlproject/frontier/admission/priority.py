"""Crawl order: the priority policies of the frontier (``CRAWL_PRIORITY_POLICY``).

Each host's queue has 32 priority bands (Mercator's front queues, kept per
host: lists, FIFO within a band, band 0 first), and among hosts that may be
fetched now the frontier prefers the one whose best band is best (``due`` in
keys.py); politeness decides *when* a host may be fetched, the policy only
*which* of its URLs and which of the waiting hosts. Bands, not exact scores,
keep a queued URL as cheap as a list entry (BENCHMARKS.md). A policy works in
one of two modes:

``score``
    :meth:`PriorityPolicy.value` is the URL's score: its band, rounded and
    clamped to 0..31, lower first. ``depth`` is one (depth 0..31 exactly); a
    policy of your own is another::

        class ShortUrlsFirst:
            mode = "score"

            def value(self, request: Request) -> float:
                return len(request.url) / 16

    and ``CRAWL_PRIORITY_POLICY = "myproject.policies.ShortUrlsFirst"`` (a
    ``from_crawler(crawler)`` classmethod is used when present).

``credit``
    AOPIC: :meth:`value` is the credit a URL brings (a seed's, or the share a
    fetched page passed to its links); the frontier adds it to the URL's credit
    if it is queued already (moving it to a better band when it gets there),
    and at claim time pays a tax into the lambda cash that it spreads over all
    queued URLs (claim.lua). Bands are half-octaves of the credit received
    from links (credit 1 in band 8, 16 and more in band 0); the lambda share
    is paid at claim time and does not move URLs between bands. The shares are computed by
    :class:`middlewares.aopic.AopicCreditMiddleware`.

Scores of the two modes mean different things, so a crawl keeps its mode for
life (the frontier refuses a worker with the other one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler, load_object

from crawlproject.frontier.basics.request_meta import CREDIT_META_KEY, SHARE_META_KEY
from crawlproject.frontier.basics.request_meta import (
    CREDIT_WEIGHT_META_KEY as CREDIT_WEIGHT_META_KEY,  # re-exported: middlewares/dedupe.py
)
from crawlproject.frontier.crawl.config import ConfigError

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


SCORE_MODE = "score"
CREDIT_MODE = "credit"


@runtime_checkable
class PriorityPolicy(Protocol):
    mode: ClassVar[str]  # "score" or "credit"

    def value(self, request: Request) -> float:
        """The URL's score (its band, lower first), or in credit mode the credit it brings."""
        ...


class DepthPriority:
    """Breadth-first: hops from a seed, less Scrapy's ``Request.priority``
    (which redirects raise by 2 and retries lower by 1)."""

    mode: ClassVar[str] = SCORE_MODE

    def value(self, request: Request) -> float:
        return float(request.meta.get("depth", 0)) - request.priority


class AopicPriority:
    """AOPIC credit: the share passed by the linking page, else a seed's credit."""

    mode: ClassVar[str] = CREDIT_MODE

    def __init__(self, seed_credit: float) -> None:
        self.seed_credit = seed_credit

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AopicPriority:
        from crawlproject.frontier.crawl.config import FrontierConfig

        return cls(seed_credit=FrontierConfig.from_settings(crawler.settings).aopic_seed_credit)

    def value(self, request: Request) -> float:
        credit = request.meta.get(CREDIT_META_KEY)
        if credit is None:
            credit = request.meta.get(SHARE_META_KEY)  # a redirect or retry: the page's own
        return self.seed_credit if credit is None else max(float(credit), 0.0)


BUILT_IN: dict[str, type] = {"depth": DepthPriority, "aopic": AopicPriority}


def policy_class(name: str) -> type:
    cls = BUILT_IN.get(name)
    if cls is None:
        try:
            cls = load_object(name)
        except (ImportError, ValueError, NameError) as exc:
            raise ConfigError(
                f"CRAWL_PRIORITY_POLICY={name!r} is neither 'depth', 'aopic' nor an "
                f"importable class: {exc}"
            ) from exc
    if getattr(cls, "mode", None) not in (SCORE_MODE, CREDIT_MODE) or not callable(
        getattr(cls, "value", None)
    ):
        raise ConfigError(
            f"CRAWL_PRIORITY_POLICY={name!r}: a policy class needs mode = 'score' or "
            "'credit' and a value(request) method"
        )
    return cls


def build_policy(crawler: Crawler, name: str) -> PriorityPolicy:
    cls = policy_class(name)
    try:
        policy = build_from_crawler(cls, crawler) if hasattr(cls, "from_crawler") else cls()
    except NotConfigured as exc:
        raise ConfigError(f"CRAWL_PRIORITY_POLICY={name!r} is not configured: {exc}") from exc
    assert isinstance(policy, PriorityPolicy)
    return policy
