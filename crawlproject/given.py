"""Whether the user set a setting: the one place that reads Scrapy's setting
priorities for it (issue 42, item 5).

Scrapy keeps, beside each value, the priority it was set at: ``default`` (0,
Scrapy's own defaults), ``command`` and ``addon``, ``project`` (the settings
module), ``spider`` (``custom_settings``) and ``cmdline`` (``-s``). The project
settings module (crawlproject/settings.py) copies every ``CRAWL_*`` default
from crawlproject/default_settings/, so a ``CRAWL_*`` value at project priority
is the user's only when it differs from that default.

A bottom-layer module (Scrapy's settings and the declared defaults only): the
settings check, the redaction of secrets and the frontier all ask it.
"""

from __future__ import annotations

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from crawlproject import default_settings

PROJECT = SETTINGS_PRIORITIES["project"]


def is_given(settings: BaseSettings, name: str, *, above_project: bool = False) -> bool:
    """Whether ``name`` was set by the user (command line, spider, settings
    module) rather than left at its default: Scrapy's own default, or the
    ``CRAWL_*`` default the settings module copies from default_settings.

    ``above_project``: only a value set above the settings module counts (the
    spider's ``custom_settings`` or attributes, ``-s``): for a Scrapy setting
    the project's own settings module also sets, and for an environment
    variable's value, which the settings module puts there."""
    priority = settings.getpriority(name)
    if priority is None or priority <= SETTINGS_PRIORITIES["default"]:
        return False
    if priority > PROJECT:
        return True
    if above_project:
        return False
    if not hasattr(default_settings, name):
        return True
    return bool(settings.get(name) != getattr(default_settings, name))
