"""Which crawl a spider joins: the one rule every reader of the crawl's name
(the scheduler, the store pipeline, the status reporter, the CLI) applies.

First found of:

1. the spider argument ``-a crawl=NAME`` (a spider's ``crawl_name``
   attribute, or the ``crawl`` attribute Scrapy sets from ``-a crawl=``);
2. the ``CRAWL_NAME`` setting (``-s``, settings module, a spider's
   ``custom_settings``, Scrapyd) or environment variable;
3. the spider's ``name``: each spider has a crawl of its own, so two spiders
   on one Redis never share a queue, a seen set or a duplicate index;
4. ``web`` (:data:`DEFAULT_CRAWL`), for a reader without a spider: the
   ``crawlproject`` command.

Before this rule every spider joined ``web`` unless told otherwise: a crawl a
spider other than ``web`` made then is resumed with ``-a crawl=web``.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from crawlproject.frontier.crawl.redis_settings import from_environment
from crawlproject.frontier.store.keys import CRAWL_NAME_RE
from crawlproject.setting_values import ConfigError

DEFAULT_CRAWL = "web"


@dataclass(frozen=True, slots=True)
class CrawlName:
    """A crawl's name and where it came from (for the start's log line)."""

    name: str
    source: str  # spider argument | environment | setting | spider name | default


def crawl_name_of(spider: object | None, settings: BaseSettings) -> CrawlName:
    """The crawl ``spider`` (None: the CLI) joins, by the module docstring's rule."""
    for attr in ("crawl_name", "crawl"):
        value = getattr(spider, attr, None) if spider is not None else None
        if isinstance(value, str) and value.strip():
            return _checked(value.strip(), "spider argument")
    setting = settings.get("CRAWL_NAME")
    if isinstance(setting, str) and setting.strip():
        source = "environment" if from_environment(settings, "CRAWL_NAME") else "setting"
        return _checked(setting.strip(), source)
    name = getattr(spider, "name", None) if spider is not None else None
    if isinstance(name, str) and name:
        return _checked(name, "spider name")
    return CrawlName(DEFAULT_CRAWL, "default")


def crawl_name(spider: object | None, settings: BaseSettings) -> str:
    """The name alone (:func:`crawl_name_of`)."""
    return crawl_name_of(spider, settings).name


def _checked(name: str, source: str) -> CrawlName:
    if not CRAWL_NAME_RE.match(name):
        fix = "set CRAWL_NAME or -a crawl=NAME" if source == "spider name" else "rename it"
        raise ConfigError(
            f"crawl name {name!r} (from the {source}) must be 1-64 characters of "
            f"letters, digits, _ . -: {fix}"
        )
    return CrawlName(name, source)
