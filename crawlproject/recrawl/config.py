"""The recrawl settings (``CRAWL_RECRAWL_*``, and ``CRAWL_SIMHASH_K``), read once and checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from scrapy.settings import BaseSettings

from crawlproject.setting_values import ConfigError, Setting, read_config

# Request meta keys: the URL's fetch state text (recrawl_promote.lua puts it
# on a refetch), and a sitemap entry's <lastmod> and <changefreq> (spiders/web.py).
STATE_META_KEY = "crawl_recrawl"
LASTMOD_META_KEY = "crawl_lastmod"
CHANGEFREQ_META_KEY = "crawl_changefreq"

# Upper bound of CRAWL_RECRAWL_INC_RATE: x11 per unchanged fetch is already
# absurd; anything larger is surely a typo (Nutch advises <= 0.5).
MAX_INC_RATE = 10.0
# CRAWL_SIMHASH_K's range as DedupeConfig enforces it (one setting, one range).
MAX_SIMHASH_K = 15


@dataclass(frozen=True, slots=True)
class RecrawlConfig:
    track: Annotated[bool, Setting("CRAWL_RECRAWL_TRACK")]
    default_interval_s: Annotated[int, Setting("CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS")]
    min_interval_s: Annotated[int, Setting("CRAWL_RECRAWL_MIN_INTERVAL_SECONDS")]
    max_interval_s: Annotated[int, Setting("CRAWL_RECRAWL_MAX_INTERVAL_SECONDS")]
    inc_rate: Annotated[float, Setting("CRAWL_RECRAWL_INC_RATE")]
    dec_rate: Annotated[float, Setting("CRAWL_RECRAWL_DEC_RATE")]
    gone_after: Annotated[int, Setting("CRAWL_RECRAWL_GONE_AFTER")]
    batch: Annotated[int, Setting("CRAWL_RECRAWL_BATCH")]
    max_queued: Annotated[int, Setting("CRAWL_RECRAWL_MAX_QUEUED")]
    poll_seconds: Annotated[float, Setting("CRAWL_RECRAWL_POLL_SECONDS")]
    simhash_k: Annotated[int, Setting("CRAWL_SIMHASH_K")]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RecrawlConfig:
        return read_config(cls, settings)

    def validate(self) -> None:
        # Comparisons are written as `not (in range)` so that NaN is refused too.
        if not self.min_interval_s > 0:
            raise ConfigError(
                f"CRAWL_RECRAWL_MIN_INTERVAL_SECONDS must be > 0, got {self.min_interval_s}"
            )
        if self.min_interval_s > self.max_interval_s:
            raise ConfigError(
                "CRAWL_RECRAWL_MIN_INTERVAL_SECONDS must be <= CRAWL_RECRAWL_MAX_INTERVAL_SECONDS, "
                f"got {self.min_interval_s} > {self.max_interval_s}"
            )
        if not self.min_interval_s <= self.default_interval_s <= self.max_interval_s:
            raise ConfigError(
                "CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS must be within "
                "CRAWL_RECRAWL_MIN_INTERVAL_SECONDS..CRAWL_RECRAWL_MAX_INTERVAL_SECONDS "
                f"({self.min_interval_s}..{self.max_interval_s}), got {self.default_interval_s}"
            )
        if not 0 < self.inc_rate <= MAX_INC_RATE:
            raise ConfigError(
                f"CRAWL_RECRAWL_INC_RATE must be in (0, {MAX_INC_RATE:g}], got {self.inc_rate}"
            )
        # 1 or more would make a changed page's interval 0 or negative.
        if not 0 < self.dec_rate < 1:
            raise ConfigError(f"CRAWL_RECRAWL_DEC_RATE must be in (0, 1), got {self.dec_rate}")
        if self.gone_after < 1:
            raise ConfigError(f"CRAWL_RECRAWL_GONE_AFTER must be >= 1, got {self.gone_after}")
        if self.batch < 1:
            raise ConfigError(f"CRAWL_RECRAWL_BATCH must be >= 1, got {self.batch}")
        if self.max_queued < 1:
            raise ConfigError(f"CRAWL_RECRAWL_MAX_QUEUED must be >= 1, got {self.max_queued}")
        if not self.poll_seconds > 0:
            raise ConfigError(f"CRAWL_RECRAWL_POLL_SECONDS must be > 0, got {self.poll_seconds}")
        if not 0 <= self.simhash_k <= MAX_SIMHASH_K:
            raise ConfigError(
                f"CRAWL_SIMHASH_K must be within 0..{MAX_SIMHASH_K}, got {self.simhash_k}"
            )
