"""Settings read as the user meant them: checked once, before anything starts.

Two mistakes a Scrapy user makes in the first hour pass silently or end in a
traceback from deep inside a component:

- a misspelt name (``-s CRAWL_HOST_DELAI=1``): Scrapy keeps any name, so the
  setting is ignored. :func:`misspelt_settings` gives one WARNING line per
  unknown ``CRAWL_*`` name (and per near miss of a scrapy-redis name or of a
  ``CRAWL_*`` name), with the closest known name;
- a value that cannot be read (``-s CRAWL_HOST_DELAY=abc``): the component's
  ``getfloat`` raises ValueError inside the engine. :func:`refuse_unreadable`
  raises :class:`ConfigError` (one line: the setting, the value, what it
  expects) for the first declared setting whose value cannot be read as its
  type; Scrapy's own true/false and numeric settings too
  (``CONCURRENT_REQUESTS=abc`` ends in a traceback inside Scrapy).

A declared setting's type is its annotation in crawlproject/default_settings/
(``CRAWL_GUARD_ALLOW: list[str] = []``), else its default's type, as
:func:`crawlproject.setting_values.crawl_setting` reads it; a value Scrapy's
``getbool``/``getint``/``getfloat``/``getlist``/``getdict`` accept is valid
("0"/"1"/"true", "a,b" for a list, JSON for a dict). What a valid type may
hold (ranges, choices, hosts) stays the components' own check (their configs'
``validate()``), also run before the start (crawlproject/commands/crawl.py).
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import pkgutil
import types
from collections.abc import Iterable, Mapping
from typing import Any, Union, get_args, get_origin, get_type_hints

from scrapy.settings import BaseSettings
from scrapy.settings import default_settings as scrapy_defaults

from crawlproject import default_settings
from crawlproject.frontier.crawl.redis_settings import ENVIRONMENT_SETTINGS
from crawlproject.setting_values import ConfigError

# CRAWL_* names the code reads that are not declared in default_settings/
# (none today: tests/test_setting_mistakes.py checks every name the code reads).
READ_NOT_DECLARED: frozenset[str] = frozenset()

# scrapy-redis's settings (0.9: defaults.py, redis_client.py, scheduler.py,
# spiders.py, pipelines.py, dupefilter.py): honoured, or refused with what to
# use instead (crawlproject/frontier/crawl/redis_settings.py), never unknown.
SCRAPY_REDIS_SETTINGS = frozenset(
    {
        "REDIS_URL", "REDIS_HOST", "REDIS_PORT", "REDIS_DB", "REDIS_PARAMS", "REDIS_ENCODING",
        "REDIS_CLS", "REDIS_DECODE_RESPONSES", "REDIS_START_URLS_KEY",
        "REDIS_START_URLS_AS_SET", "REDIS_START_URLS_AS_ZSET", "REDIS_START_URLS_BATCH_SIZE",
        "REDIS_ITEMS_KEY", "REDIS_ITEMS_SERIALIZER", "SCHEDULER_PERSIST",
        "SCHEDULER_QUEUE_KEY", "SCHEDULER_QUEUE_CLASS", "SCHEDULER_DUPEFILTER_KEY",
        "SCHEDULER_DUPEFILTER_CLASS", "SCHEDULER_SERIALIZER", "SCHEDULER_IDLE_BEFORE_CLOSE",
        "SCHEDULER_FLUSH_ON_START", "DUPEFILTER_KEY", "DUPEFILTER_DEBUG",
        "MAX_IDLE_TIME_BEFORE_CLOSE",
    }
)  # fmt: skip
# Name families of scrapy-redis: an unknown name in one of them is checked for
# a near miss (a user's own REDIS_PASSWORD for their own pipeline is no miss).
_SCRAPY_REDIS_FAMILIES = ("REDIS_", "SCHEDULER_", "DUPEFILTER_", "MAX_IDLE_")
# Closeness (difflib's ratio) of a suggestion for an unknown CRAWL_* name, and
# of a name outside the prefix that is taken for a near miss of a known one
# (high, so a user's own settings never warn).
_SUGGEST_CUTOFF = 0.6
_NEAR_MISS_CUTOFF = 0.85


# Types wider than the default's where the declaration has no annotation:
# the duplicate filter's config also takes True/False (all/none).
_WIDER: dict[str, Any] = {"CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS": str | bool}


def declared_types() -> dict[str, Any]:
    """Every setting declared in crawlproject/default_settings/ -> its type:
    the annotation, else its default's type; None for a setting with a None
    default and no annotation (free: any value reads)."""
    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(default_settings.__path__):
        module = importlib.import_module(f"{default_settings.__name__}.{info.name}")
        hints = get_type_hints(module)
        for name, value in vars(module).items():
            if name.isupper() and not name.startswith("_"):
                found[name] = hints.get(name, None if value is None else type(value))
    return found | {name: kind for name, kind in _WIDER.items() if name in found}


DECLARED = declared_types()
KNOWN = frozenset(DECLARED) | READ_NOT_DECLARED | SCRAPY_REDIS_SETTINGS
_SCRAPY_OWN = frozenset(n for n in dir(scrapy_defaults) if n.isupper())
# Scrapy's own settings with a true/false or numeric default: a value its
# getters cannot read ends in a traceback inside Scrapy (CONCURRENT_REQUESTS=abc).
# A number is any number: Scrapy reads some int defaults with getfloat
# (DOWNLOAD_DELAY = 0, DOWNLOAD_TIMEOUT = 180).
SCRAPY_TYPED: dict[str, Any] = {
    name: bool if isinstance(value, bool) else float
    for name in sorted(_SCRAPY_OWN)
    if isinstance(value := getattr(scrapy_defaults, name), bool | int | float)
}
_CRAWL_TAILS = sorted(n.removeprefix("CRAWL_") for n in KNOWN if n.startswith("CRAWL_"))


# --- names ------------------------------------------------------------------


def misspelt_settings(
    settings: BaseSettings, environ: Mapping[str, str] | None = None
) -> list[str]:
    """One line per setting name that is not a setting of crawlproject (nor
    Scrapy's, nor scrapy-redis's) and looks meant as one; and per ``CRAWL_*``
    environment variable that is not read (only :data:`ENVIRONMENT_SETTINGS` are)."""
    lines = [line for name in sorted(settings) if (line := _name_line(name))]
    env = os.environ if environ is None else environ
    lines += [line for name in sorted(env) if (line := _environment_line(name))]
    return lines


def _name_line(name: str) -> str | None:
    if name in KNOWN or name in _SCRAPY_OWN:
        return None
    upper = name.upper()
    if upper in KNOWN:  # Scrapy's names are case-sensitive: crawl_host_delay is not read
        return f"{name} is not a setting of crawlproject: did you mean {upper}?"
    if upper.startswith("CRAWL_"):
        # Compared without the prefix every candidate shares (it would make
        # any CRAWL_ name look close to some other).
        close = difflib.get_close_matches(upper[6:], _CRAWL_TAILS, n=1, cutoff=_SUGGEST_CUTOFF)
        hint = f"did you mean CRAWL_{close[0]}?" if close else "docs/settings.md lists them all"
        return f"{name} is not a setting of crawlproject: {hint}"
    pool = SCRAPY_REDIS_SETTINGS if upper.startswith(_SCRAPY_REDIS_FAMILIES) else KNOWN
    close = difflib.get_close_matches(upper, pool, n=1, cutoff=_NEAR_MISS_CUTOFF)
    if not close:
        return None
    return f"{name} is not a setting of crawlproject or scrapy-redis: did you mean {close[0]}?"


def _environment_line(name: str) -> str | None:
    if not name.upper().startswith("CRAWL_") or name in ENVIRONMENT_SETTINGS:
        return None
    only = ", ".join(ENVIRONMENT_SETTINGS)
    close = difflib.get_close_matches(name.upper(), ENVIRONMENT_SETTINGS, n=1, cutoff=0.8)
    if close:
        return f"environment variable {name} is not read: did you mean {close[0]}?"
    if name in KNOWN:
        return (
            f"environment variable {name} is not read (the environment gives only {only}): "
            f"use -s {name}=... or the settings module"
        )
    return None


# --- values -----------------------------------------------------------------


def refuse_unreadable(settings: BaseSettings) -> None:
    """ConfigError (one line) for the first declared setting whose value
    cannot be read as its declared type, then for Scrapy's own true/false and
    numeric settings."""
    for name, kind in [*sorted(DECLARED.items()), *SCRAPY_TYPED.items()]:
        if kind is None:
            continue
        value = settings.get(name)
        if value is None or _reads_as(value, kind):
            continue
        raise ConfigError(f"{name}={value!r}: expected {_expected(name, kind)}")


def _arms(kind: Any) -> tuple[Any, ...]:
    if get_origin(kind) in (Union, types.UnionType):
        return get_args(kind)
    return (kind,)


def _reads_as(value: Any, kind: Any) -> bool:
    """Whether ``value`` reads as ``kind`` the way crawl_setting's getter reads it."""
    arms = _arms(kind)
    if type(None) in arms and value == "":
        return True  # -s NAME= : unset
    return any(_reads_as_arm(value, arm) for arm in arms if arm is not type(None))


def _reads_as_arm(value: Any, arm: Any) -> bool:
    base = get_origin(arm) or arm
    if base is Any:
        return True
    if base is bool:
        return _bool(value)
    if base is int:
        return _converts(int, value)
    if base is float:
        return _converts(float, value)
    if base is str:
        return isinstance(value, str | os.PathLike)
    if base is list:
        return _list(value, get_args(arm))
    if base is dict:
        return _dict(value)
    return isinstance(value, base)


def _bool(value: Any) -> bool:
    # BaseSettings.getbool: bool(int(value)), else 'True'/'true'/'False'/'false'.
    return value in ("True", "true", "False", "false") or _converts(int, value)


def _converts(kind: type, value: Any) -> bool:
    try:
        kind(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True


def _list(value: Any, element: tuple[Any, ...]) -> bool:
    # BaseSettings.getlist: a string is split on commas; any other iterable
    # is taken whole (a dict would give its keys: never what was meant).
    if isinstance(value, str):
        items: Iterable[Any] = value.split(",") if value else []
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    else:
        return False
    return not element or all(_reads_as(item, element[0]) for item in items)


def _dict(value: Any) -> bool:
    # BaseSettings.getdict: a string is JSON, which must give a dict.
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, dict | BaseSettings)


def _expected(name: str, kind: Any) -> str:
    arms = [arm for arm in _arms(kind) if arm is not type(None)]
    said = " or ".join(_expected_arm(name, arm) for arm in arms)
    return f"{said}, or nothing (unset)" if len(arms) < len(_arms(kind)) else said


def _unit(name: str) -> str:
    if name.endswith(("_SECONDS", "_DELAY", "_TIMEOUT")):
        return " (seconds)"
    if name.endswith("_BYTES"):
        return " (bytes)"
    return ""


def _expected_arm(name: str, arm: Any) -> str:
    base = get_origin(arm) or arm
    if base is bool:
        return "true or false (True/False, 1/0)"
    if base is int:
        return f"a whole number{_unit(name)}"
    if base is float:
        return f"a number{_unit(name)}"
    if base is str:
        return "a string"
    if base is list:
        args = get_args(arm)
        of = f" of {_plural(args[0])}" if args else ""
        return f"a list{of} (comma-separated with -s)"
    if base is dict:
        return "a dict (JSON with -s)"
    return getattr(base, "__name__", str(base))


def _plural(kind: Any) -> str:
    words = {int: "whole numbers", float: "numbers", str: "strings", bool: "true/false"}
    return " or ".join(words.get(arm, getattr(arm, "__name__", str(arm))) for arm in _arms(kind))
