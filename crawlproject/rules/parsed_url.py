"""What a URL rule looks at (:class:`ParsedUrl`, a canonical URL and its
parts) and the shape of a rule (:class:`UrlRule`): kept apart from
url_rules.py, which builds the rules from the settings, so that the trap rules
(traps.py) that url_rules.py builds can name them without importing it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlsplit


@dataclass(frozen=True)
class ParsedUrl:
    """A canonical URL and its parts (host lowercase, default port dropped)."""

    url: str
    scheme: str
    host: str
    path: str
    query: str
    _extension: str = field(default="", repr=False)

    @classmethod
    def parse(cls, canonical_url: str) -> ParsedUrl:
        parts = urlsplit(canonical_url)
        return cls(
            canonical_url, parts.scheme, (parts.hostname or "").lower(), parts.path, parts.query
        )

    @cached_property
    def query_params(self) -> dict[str, str]:
        return dict(parse_qsl(self.query, keep_blank_values=True))

    @property
    def extension(self) -> str:
        """The last path segment's extension, lowercase ("" without one)."""
        name = self.path.rsplit("/", 1)[-1]
        return name.rsplit(".", 1)[-1].lower() if "." in name else ""


@runtime_checkable
class UrlRule(Protocol):
    def check(self, url: ParsedUrl) -> str | None:
        """Why ``url`` is refused (a stat-friendly name), or None."""
