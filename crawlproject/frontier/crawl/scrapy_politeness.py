"""A Scrapy user's own politeness settings, taken as the fleet's (a Scrapy add-on).

Scrapy's tutorial and docs teach ``custom_settings = {"DOWNLOAD_DELAY": 1}``,
``download_delay = 1`` on the spider class, ``CONCURRENT_REQUESTS_PER_DOMAIN``,
``AUTOTHROTTLE_ENABLED`` and ``DOWNLOAD_SLOTS``. Scrapy applies them per
process; left as they are they would throttle hosts a second time on top of
the frontier's fleet-wide politeness. What the user meant is clear, and the
frontier does it fleet-wide, so the add-on (``ADDONS`` in crawlproject/settings.py)
takes what the USER set (above the ``project`` priority: a spider's
custom_settings or ``-s``; or the spider attributes ``download_delay`` /
``max_concurrent_requests``, which Scrapy 2.19 itself bridges onto the settings
right after the add-ons, unless those settings are set at spider priority):

* ``DOWNLOAD_DELAY`` = d > 0 -> ``CRAWL_HOST_DELAY`` = d, Scrapy's own 0;
* ``CONCURRENT_REQUESTS_PER_DOMAIN`` = n below ``CONCURRENT_REQUESTS`` (a cap
  at all) -> ``CRAWL_HOST_CONCURRENCY`` = n, Scrapy's own raised to
  ``CONCURRENT_REQUESTS`` (the host key is not Scrapy's downloader slot key: host:port, domain);
* ``AUTOTHROTTLE_ENABLED`` -> Scrapy's AutoThrottle off, the frontier's adaptive
  delay (``CRAWL_ADAPTIVE_DELAY_FACTOR``) on; ``AUTOTHROTTLE_MAX_DELAY`` ->
  ``CRAWL_ADAPTIVE_DELAY_MAX_SECONDS``;
* ``DOWNLOAD_SLOTS`` {host: {"delay", "concurrency"}} -> ``CRAWL_HOST_OVERRIDES``,
  Scrapy's own emptied.

A value the crawl's own setting also gives, differently, is refused with one
line (ConfigError), as is AutoThrottle with the adaptive delay turned off.
Project-level values are not the user's spider: config.refuse_scrapy_politeness
refuses what is left. The mapping is pure (settings in, settings out) and
idempotent: the worker's start check runs it on a copy before the crawl does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from crawlproject.frontier.crawl.host_overrides import read_host_overrides
from crawlproject.frontier.crawl.on_frontier import is_frontier
from crawlproject.given import is_given
from crawlproject.setting_values import ConfigError, crawl_setting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger("crawlproject.frontier.scrapy_politeness")  # its documented path

SPIDER = SETTINGS_PRIORITIES["spider"]
_SLOT_KEYS = frozenset({"delay", "concurrency", "jitter", "randomize_delay"})


@dataclass(frozen=True)
class Taken:
    """What one setting was taken as: a lazy %-format log line and its args."""

    message: str
    args: tuple[Any, ...]


def take_scrapy_politeness(settings: BaseSettings, spider: object | None = None) -> list[Taken]:
    """Maps the user's Scrapy politeness settings (and ``spider``'s attributes,
    a class or an instance) onto the frontier's, in ``settings``; what was
    taken as what. ConfigError (one line) for what contradicts the crawl's own."""
    if not is_frontier(load_object(settings["SCHEDULER"])):
        return []  # Scrapy's own scheduler: its per-process politeness is all there is
    return [
        *_take_delay(settings, spider),
        *_take_concurrency(settings, spider),
        *_take_autothrottle(settings),
        *_take_download_slots(settings),
    ]


def _users_value(
    settings: BaseSettings, name: str, spider: object | None, attribute: str
) -> tuple[str, Any, int] | None:
    """(where it came from, value, priority) of ``name``, or of the spider
    attribute Scrapy bridges onto it when ``name`` is below spider priority."""
    if (settings.getpriority(name) or 0) >= SPIDER:
        return name, settings.get(name), settings.getpriority(name) or SPIDER
    if spider is not None and hasattr(spider, attribute):
        return f"spider attribute {attribute}", getattr(spider, attribute), SPIDER
    if is_given(settings, name, above_project=True):
        return name, settings.get(name), settings.getpriority(name) or SPIDER
    return None


def _attribute_note(source: str) -> str:
    """Said after a spider attribute: Scrapy then warns that it ignores it."""
    if not source.startswith("spider attribute"):
        return ""
    return " (Scrapy's warning that it ignores the attribute is about its own copy)"


def _refuse_other(settings: BaseSettings, name: str, value: Any, source: str) -> None:
    """ConfigError when the crawl's own ``name`` is set explicitly to another value."""
    own = crawl_setting(settings, name)
    if is_given(settings, name) and own != value:
        raise ConfigError(
            f"{source} ({value!r}) is taken as {name}, which is set to {own!r}: set only one"
        )


def _take_delay(settings: BaseSettings, spider: object | None) -> list[Taken]:
    found = _users_value(settings, "DOWNLOAD_DELAY", spider, "download_delay")
    if found is None:
        return []
    source, raw, priority = found
    try:
        delay = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{source} must be a number of seconds, not {raw!r}") from None
    if delay <= 0:
        return []  # Scrapy's own default: nothing asked of the frontier
    _refuse_other(settings, "CRAWL_HOST_DELAY", delay, source)
    settings.set("CRAWL_HOST_DELAY", delay, priority=priority)
    # At spider priority or above, Scrapy no longer bridges download_delay itself.
    settings.set("DOWNLOAD_DELAY", 0, priority=priority)
    return [
        Taken(
            "%s = %s taken as CRAWL_HOST_DELAY = %s (per host, fleet-wide, from the end of "
            "one fetch to the next); Scrapy's per-process DOWNLOAD_DELAY set to 0 so the "
            "delay does not apply twice%s",
            (source, delay, delay, _attribute_note(source)),
        )
    ]


def _take_concurrency(settings: BaseSettings, spider: object | None) -> list[Taken]:
    found = _users_value(
        settings, "CONCURRENT_REQUESTS_PER_DOMAIN", spider, "max_concurrent_requests"
    )
    if found is None:
        return []
    source, raw, priority = found
    total = settings.getint("CONCURRENT_REQUESTS")
    try:
        cap = int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{source} must be a whole number, not {raw!r}") from None
    if cap >= total:
        return []  # no cap below the process's own: the fleet's politeness is all
    if cap < 1:
        raise ConfigError(f"{source} must be >= 1 (requests at once per site), not {cap}")
    _refuse_other(settings, "CRAWL_HOST_CONCURRENCY", cap, source)
    settings.set("CRAWL_HOST_CONCURRENCY", cap, priority=priority)
    # Scrapy's downloader slot is the hostname (the frontier's key may be host:port or the
    # domain): its cap left out of the way, the fleet's does the limiting.
    settings.set("CONCURRENT_REQUESTS_PER_DOMAIN", total, priority=priority)
    return [
        Taken(
            "%s = %s taken as CRAWL_HOST_CONCURRENCY = %s (requests at once per host, "
            "fleet-wide); Scrapy's per-process CONCURRENT_REQUESTS_PER_DOMAIN set to %s so "
            "it does not throttle a second time%s",
            (source, cap, cap, total, _attribute_note(source)),
        )
    ]


def _take_autothrottle(settings: BaseSettings) -> list[Taken]:
    on = settings.getbool("AUTOTHROTTLE_ENABLED")
    if not (on and is_given(settings, "AUTOTHROTTLE_ENABLED", above_project=True)):
        return []
    factor = crawl_setting(settings, "CRAWL_ADAPTIVE_DELAY_FACTOR")
    if factor <= 0:
        raise ConfigError(
            "AUTOTHROTTLE_ENABLED asks for a delay that follows the response time, and "
            "CRAWL_ADAPTIVE_DELAY_FACTOR = 0 turns the frontier's off: set only one"
        )
    settings.set(
        "AUTOTHROTTLE_ENABLED",
        False,
        priority=settings.getpriority("AUTOTHROTTLE_ENABLED") or SPIDER,
    )
    taken = [
        Taken(
            "AUTOTHROTTLE_ENABLED taken as the frontier's adaptive delay (a host's delay at "
            "least CRAWL_ADAPTIVE_DELAY_FACTOR = %s times its response time, fleet-wide); "
            "Scrapy's per-process AutoThrottle off so the two do not stack",
            (factor,),
        )
    ]
    if is_given(settings, "AUTOTHROTTLE_MAX_DELAY", above_project=True):
        most = settings.getfloat("AUTOTHROTTLE_MAX_DELAY")
        _refuse_other(settings, "CRAWL_ADAPTIVE_DELAY_MAX_SECONDS", most, "AUTOTHROTTLE_MAX_DELAY")
        priority = settings.getpriority("AUTOTHROTTLE_MAX_DELAY") or SPIDER
        settings.set("CRAWL_ADAPTIVE_DELAY_MAX_SECONDS", most, priority=priority)
        taken.append(
            Taken("AUTOTHROTTLE_MAX_DELAY = %s taken as CRAWL_ADAPTIVE_DELAY_MAX_SECONDS", (most,))
        )
    return taken


def _take_download_slots(settings: BaseSettings) -> list[Taken]:
    if not is_given(settings, "DOWNLOAD_SLOTS", above_project=True):
        return []
    download_slots = settings.getdict("DOWNLOAD_SLOTS")
    if not download_slots:
        return []
    mapped: dict[str, dict[str, Any]] = {}
    for download_slot, spec in download_slots.items():
        if not isinstance(spec, dict) or not set(spec) <= _SLOT_KEYS:
            raise ConfigError(
                f"DOWNLOAD_SLOTS[{download_slot!r}] must be a dict of delay, concurrency, jitter; "
                f"got {spec!r}: set CRAWL_HOST_OVERRIDES instead"
            )
        # Jitter has no counterpart: the frontier's delay is exact, from the end of a fetch.
        entry = {k: spec[k] for k in ("delay", "concurrency") if k in spec}
        if entry:
            mapped[str(download_slot)] = entry
    politeness = crawl_setting(settings, "CRAWL_POLITENESS_KEY")
    try:
        theirs = read_host_overrides(mapped, politeness)
    except ConfigError as exc:
        raise ConfigError(
            f"DOWNLOAD_SLOTS cannot be taken as CRAWL_HOST_OVERRIDES: {exc}"
        ) from None
    own: dict[str, Any] = {}
    if is_given(settings, "CRAWL_HOST_OVERRIDES"):
        own = dict(settings.getdict("CRAWL_HOST_OVERRIDES"))
        for key, override in read_host_overrides(own, politeness).items():
            if key in theirs and theirs[key] != override:
                raise ConfigError(
                    f"DOWNLOAD_SLOTS and CRAWL_HOST_OVERRIDES give host {key!r} different "
                    "values: set only CRAWL_HOST_OVERRIDES"
                )
    priority = settings.getpriority("DOWNLOAD_SLOTS") or SPIDER
    settings.set(
        "CRAWL_HOST_OVERRIDES",
        {**mapped, **own},
        priority=max(priority, settings.getpriority("CRAWL_HOST_OVERRIDES") or 0),
    )
    settings.set("DOWNLOAD_SLOTS", {}, priority=priority)
    return [
        Taken(
            "DOWNLOAD_SLOTS %s taken as CRAWL_HOST_OVERRIDES (per host, fleet-wide); "
            "Scrapy's per-process DOWNLOAD_SLOTS emptied so they do not apply twice",
            (mapped,),
        )
    ]


def enabled(settings: BaseSettings) -> bool:
    """Whether ``settings``' ADDONS hold this add-on."""
    return any(
        load_object(path) is ScrapyPoliteness for path in build_component_list(settings["ADDONS"])
    )


def as_taken(settings: BaseSettings, spider: object | None = None) -> BaseSettings:
    """``settings`` as the crawl will hold them once the add-on ran (a copy;
    ``settings`` itself without the add-on): the worker's start check runs
    before the add-on does, and refuses what it would refuse (ConfigError)."""
    if not enabled(settings):
        return settings
    view = settings.copy()
    view.frozen = False  # a copy of the crawl's frozen settings: changed here only
    take_scrapy_politeness(view, spider)
    return view


class ScrapyPoliteness:
    """The add-on: runs after the spider's custom_settings (Crawler.__init__)
    and before Scrapy bridges spider attributes and freezes the settings."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        crawler = self.crawler
        # The instance once crawl() made it (attributes set in __init__ too).
        spider = crawler.spider if crawler.spider is not None else crawler.spidercls
        for taken in take_scrapy_politeness(settings, spider):
            logger.info(taken.message, *taken.args)
