"""``CRAWL_STORE_STATUSES``: which HTTP statuses' responses the storage pipeline keeps.

Every response that came back is stored by default (4xx and 5xx too, as
Heritrix and wget do). The setting narrows it with codes, ranges and classes,
as a comma-separated string or a list: ``"200-299,404"``, ``["2xx", 404]``,
``"all"``. A value that cannot mean a set of statuses (a word, a code outside
100-599, a range whose ends are reversed, nothing at all) is refused with one
:class:`~crawlproject.setting_values.ConfigError` line naming the part.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from crawlproject.setting_values import ConfigError

SETTING = "CRAWL_STORE_STATUSES"
MIN_STATUS = 100
MAX_STATUS = 599
ALL = "all"

_CODE = re.compile(r"\d+")
_RANGE = re.compile(r"(\d+)\s*-\s*(\d+)")
_CLASS = re.compile(r"([1-5])xx", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class StatusSet:
    """Inclusive ranges of statuses; ``None``: every status."""

    ranges: tuple[tuple[int, int], ...] | None = None

    def __contains__(self, status: object) -> bool:
        if not isinstance(status, int):
            return False
        if self.ranges is None:
            return True
        return any(low <= status <= high for low, high in self.ranges)

    def __str__(self) -> str:
        if self.ranges is None:
            return ALL
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges)


ALL_STATUSES = StatusSet()


def parse_statuses(value: object) -> StatusSet:
    """The statuses ``value`` names (module doc); ConfigError if it names none clearly."""
    if value is None:
        return ALL_STATUSES
    parts = _parts(value)
    if not parts:
        raise ConfigError(
            f"{SETTING} is empty: give codes and ranges such as '200-299,404', or 'all'"
        )
    if any(p.lower() == ALL for p in parts):
        if len(parts) > 1:
            raise ConfigError(f"{SETTING}={value!r}: 'all' cannot be combined with other statuses")
        return ALL_STATUSES
    return StatusSet(tuple(sorted(_range_of(p, value) for p in parts)))


def _parts(value: object) -> list[str]:
    if isinstance(value, bool):  # True/False is no status (bool is an int)
        raise ConfigError(f"{SETTING}={value!r}: give codes and ranges such as '200-299,404'")
    if isinstance(value, int):
        return [str(value)]
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, Iterable):
        parts: list[str] = []
        for element in value:
            parts += _parts(element)
        return parts
    raise ConfigError(f"{SETTING}={value!r}: give codes and ranges such as '200-299,404'")


def _range_of(part: str, value: object) -> tuple[int, int]:
    if _CODE.fullmatch(part):
        low = high = int(part)
    elif match := _RANGE.fullmatch(part):
        low, high = int(match[1]), int(match[2])
    elif match := _CLASS.fullmatch(part):
        low, high = int(match[1]) * 100, int(match[1]) * 100 + 99
    else:
        raise ConfigError(
            f"{SETTING}={value!r}: {part!r} is not a status code (404), a range (200-299) "
            "or a class (4xx)"
        )
    if not MIN_STATUS <= low <= MAX_STATUS or not MIN_STATUS <= high <= MAX_STATUS:
        raise ConfigError(
            f"{SETTING}={value!r}: {part!r} is outside the HTTP statuses {MIN_STATUS}-{MAX_STATUS}"
        )
    if low > high:
        raise ConfigError(f"{SETTING}={value!r}: the range {part!r} ends before it starts")
    return low, high
