"""Reading a ``CRAWL_*`` setting with its declared default (default_settings.py).

The default's type says how Scrapy's settings parse the value (``getint`` for
an int default, ``getlist`` for a list, …), so each component's config reads a
setting by name alone and the default lives in one place.
"""

from __future__ import annotations

from typing import Any

from scrapy.settings import BaseSettings

from crawlproject import default_settings


def crawl_setting(settings: BaseSettings, name: str) -> Any:
    default = getattr(default_settings, name)
    if isinstance(default, bool):
        return settings.getbool(name, default)
    if isinstance(default, int):
        return settings.getint(name, default)
    if isinstance(default, float):
        return settings.getfloat(name, default)
    if isinstance(default, list):
        return settings.getlist(name, default)
    if isinstance(default, dict):
        return settings.getdict(name, default)
    return settings.get(name, default)
