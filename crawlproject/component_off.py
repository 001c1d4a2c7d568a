"""Saying why a component is off, at the level it deserves.

Scrapy's middleware manager logs a ``NotConfigured`` that carries a message at
WARNING ("Disabled X: ..."): every clean run would warn about components that
are simply off by default (recrawl tracking, AOPIC credit, path ascending).
A component raises :func:`switched_off` instead: the reason is logged here,
at DEBUG while every setting named is at its default, at INFO when the user
set one of them (their choice, said once where they look), and the
``NotConfigured`` raised is bare, which Scrapy leaves unsaid.
"""

from __future__ import annotations

import logging

from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from crawlproject.given import is_given


def switched_off(
    component: type, settings: BaseSettings, reason: str, *names: str
) -> NotConfigured:
    """A bare NotConfigured for ``component``, its ``reason`` logged (see the
    module docstring); ``names``: the settings that decided it."""
    level = logging.INFO if any(is_given(settings, name) for name in names) else logging.DEBUG
    path = f"{component.__module__}.{component.__qualname__}"
    logging.getLogger(component.__module__).log(level, "Disabled %s: %s", path, reason)
    return NotConfigured()
