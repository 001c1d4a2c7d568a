"""The duplicate-detection settings (``CRAWL_DEDUPE_*``, ``CRAWL_SIMHASH_K``), read once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from scrapy.settings import BaseSettings

from crawlproject.dedupe.layout import layout_problem
from crawlproject.dedupe.spread import parts_problem
from crawlproject.setting_values import ConfigError, Setting, crawl_setting, read_config

STREAK_ACTIONS = ("park", "off")
# CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS: follow the links of a duplicate page whose
# original is on another host (a mirror's pages lead to its own), of every
# duplicate, or of none. The old booleans still work: True is "all", False "none".
FOLLOW_OTHER_HOST, FOLLOW_ALL, FOLLOW_NONE = "other_host", "all", "none"
FOLLOW_LINKS = (FOLLOW_OTHER_HOST, FOLLOW_ALL, FOLLOW_NONE)
_FOLLOW_ALIASES = {"true": FOLLOW_ALL, "1": FOLLOW_ALL, "false": FOLLOW_NONE, "0": FOLLOW_NONE}


def follow_links_value(value: object) -> str:
    """The follow-links setting as one of FOLLOW_LINKS (ConfigError otherwise)."""
    if isinstance(value, bool):
        return FOLLOW_ALL if value else FOLLOW_NONE
    text = str(value).strip().lower()
    text = _FOLLOW_ALIASES.get(text, text)
    if text not in FOLLOW_LINKS:
        raise ConfigError(
            f"CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS must be one of {', '.join(FOLLOW_LINKS)} "
            f"(or True/False for all/none), not {value!r}"
        )
    return text


@dataclass(frozen=True)
class DedupeConfig:
    enabled: Annotated[bool, Setting("CRAWL_DEDUPE_ENABLED")]
    k: Annotated[int, Setting("CRAWL_SIMHASH_K")]
    near_blocks: Annotated[int, Setting("CRAWL_DEDUPE_NEAR_BLOCKS")]
    parts: Annotated[int, Setting("CRAWL_DEDUPE_PARTS")]
    content_types: tuple[str, ...]  # CRAWL_DEDUPE_CONTENT_TYPES, lower case
    min_text_chars: Annotated[int, Setting("CRAWL_DEDUPE_MIN_TEXT_CHARS")]
    follow_duplicate_links: str  # CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS: one of FOLLOW_LINKS
    drop_items: Annotated[bool, Setting("CRAWL_DEDUPE_DROP_ITEMS")]
    record_originals: Annotated[bool, Setting("CRAWL_DEDUPE_RECORD_ORIGINALS")]
    streak: Annotated[int, Setting("CRAWL_DEDUPE_STREAK")]
    streak_action: Annotated[str, Setting("CRAWL_DEDUPE_STREAK_ACTION")]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> DedupeConfig:
        types = crawl_setting(settings, "CRAWL_DEDUPE_CONTENT_TYPES")
        follow = crawl_setting(settings, "CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS")
        return read_config(
            cls,
            settings,
            content_types=tuple(t.strip().lower() for t in types),
            follow_duplicate_links=follow_links_value(follow),
        )

    def validate(self) -> None:
        # k+1 blocks of the 64 bits must stay wide enough to index (pigeonhole).
        if not 0 <= self.k <= 15:
            raise ConfigError("CRAWL_SIMHASH_K must be within 0..15")
        if self.near_blocks:
            problem = layout_problem(self.k, self.near_blocks)
            if problem:
                raise ConfigError(f"CRAWL_DEDUPE_NEAR_BLOCKS={self.near_blocks}: {problem}")
        if self.parts == 0:
            raise ConfigError(
                "CRAWL_DEDUPE_PARTS=0: the one-tag layout was removed (issue 42); "
                "a power of 2 from 1 to 128"
            )
        if problem := parts_problem(self.parts):
            raise ConfigError(f"CRAWL_DEDUPE_PARTS={self.parts}: {problem}")
        if self.min_text_chars < 0 or self.streak < 0:
            raise ConfigError("CRAWL_DEDUPE_MIN_TEXT_CHARS and CRAWL_DEDUPE_STREAK must be >= 0")
        follow_links_value(self.follow_duplicate_links)
        if self.streak_action not in STREAK_ACTIONS:
            raise ConfigError(
                f"CRAWL_DEDUPE_STREAK_ACTION must be one of {', '.join(STREAK_ACTIONS)}"
            )
