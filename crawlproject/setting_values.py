"""Reading a ``CRAWL_*`` setting with its declared default (crawlproject/default_settings/).

The default's type says how Scrapy's settings parse the value (``getint`` for
an int default, ``getlist`` for a list, …), so each component's config reads a
setting by name alone and the default lives in one place.

A config dataclass names its settings where it declares its fields
(``ttl_seconds: Annotated[float, Setting("CRAWL_ROBOTS_TTL_SECONDS")]``) and is
read by :func:`read_config`, which also runs its ``validate()``: a wrong value
refuses the start with one ConfigError line.

:class:`ConfigError` lives here (``crawlproject.frontier.crawl.config`` re-exports
it) so that this module can refuse settings too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints

from scrapy.settings import BaseSettings

from crawlproject import default_settings
from crawlproject.given import is_given

C = TypeVar("C")


class ConfigError(ValueError):
    """Settings that contradict each other or are out of range."""


@dataclass(frozen=True, slots=True)
class Setting:
    """Field metadata of a config dataclass: the field is this ``CRAWL_*`` setting."""

    name: str


def read_config(cls: type[C], settings: BaseSettings, **values: Any) -> C:
    """``cls`` (a config dataclass) read once from ``settings``: every field
    annotated with a :class:`Setting` takes that setting (:func:`crawl_setting`),
    ``values`` give the others (computed, or Scrapy's own settings); then the
    config's ``validate()``, if it has one, refuses wrong values (ConfigError)."""
    read = {name: crawl_setting(settings, setting) for name, setting in _settings_of(cls)}
    config: C = cls(**read, **values)
    validate = getattr(config, "validate", None)
    if callable(validate):
        validate()
    return config


def _settings_of(cls: type) -> tuple[tuple[str, str], ...]:
    """(field name, setting name) of each field of ``cls`` annotated with a Setting."""
    hints = get_type_hints(cls, include_extras=True)
    return tuple(
        (f.name, meta.name)
        for f in dataclasses.fields(cls)
        for meta in getattr(hints[f.name], "__metadata__", ())
        if isinstance(meta, Setting)
    )


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


def crawl_setting_or_scrapy(
    settings: BaseSettings, name: str, scrapy_name: str, convert: Callable[[Any], Any]
) -> Any:
    """``CRAWL_*`` setting ``name``, or Scrapy's ``scrapy_name`` (its value
    through ``convert``) when only that one is given: a Scrapy user's setting
    is honoured, not silently ignored. Both given with different values:
    ConfigError."""
    own = crawl_setting(settings, name)
    if not is_given(settings, scrapy_name) or settings.get(scrapy_name) is None:
        return own
    theirs = convert(settings.get(scrapy_name))
    if is_given(settings, name) and own != theirs:
        raise ConfigError(
            f"{scrapy_name}={settings.get(scrapy_name)!r} and {name}={own!r} disagree: "
            f"set only {name}"
        )
    return theirs
