"""The robots.txt settings (``CRAWL_ROBOTS_*``), read once and checked together."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Annotated

from scrapy.settings import BaseSettings

from crawlproject.setting_values import (
    ConfigError,
    Setting,
    crawl_setting,
    crawl_setting_or_scrapy,
    read_config,
)

logger = logging.getLogger(__name__)

# RFC 9309 2.2.1: a product token is letters, "_" and "-".
PRODUCT_TOKEN_RE = re.compile(r"[A-Za-z_-]+")


def product_token(user_agent: str) -> str:
    """The product token leading a User-Agent string (``MyBot/1.0 (+url)`` ->
    ``MyBot``), as ROBOTSTXT_USER_AGENT may hold a whole User-Agent."""
    match = PRODUCT_TOKEN_RE.match(str(user_agent).strip())
    if match is None:
        raise ConfigError(
            f"ROBOTSTXT_USER_AGENT {user_agent!r} does not start with a product token "
            "(letters, '_' and '-'; RFC 9309 2.2.1)"
        )
    return match.group()


@dataclass(frozen=True)
class RobotsConfig:
    obey: Annotated[bool, Setting("CRAWL_ROBOTS_OBEY")]
    user_agent_token: str  # CRAWL_ROBOTS_USER_AGENT, or ROBOTSTXT_USER_AGENT's token
    ttl_seconds: Annotated[float, Setting("CRAWL_ROBOTS_TTL_SECONDS")]
    max_bytes: Annotated[int, Setting("CRAWL_ROBOTS_MAX_BYTES")]
    max_redirects: Annotated[int, Setting("CRAWL_ROBOTS_MAX_REDIRECTS")]
    crawl_delay_max_seconds: Annotated[float, Setting("CRAWL_ROBOTS_CRAWL_DELAY_MAX_SECONDS")]
    retry_seconds: Annotated[float, Setting("CRAWL_ROBOTS_RETRY_SECONDS")]
    retry_max_seconds: Annotated[float, Setting("CRAWL_ROBOTS_RETRY_MAX_SECONDS")]
    defer_retries: Annotated[int, Setting("CRAWL_ROBOTS_DEFER_RETRIES")]
    outage_seconds: Annotated[float, Setting("CRAWL_ROBOTS_OUTAGE_SECONDS")]
    local_cache_size: Annotated[int, Setting("CRAWL_ROBOTS_LOCAL_CACHE")]
    sitemaps: Annotated[bool, Setting("CRAWL_ROBOTS_SITEMAPS")]
    sitemap_xml: Annotated[bool, Setting("CRAWL_ROBOTS_SITEMAP_XML")]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RobotsConfig:
        # Scrapy's ROBOTSTXT_USER_AGENT is honoured: its product token.
        token = crawl_setting_or_scrapy(
            settings, "CRAWL_ROBOTS_USER_AGENT", "ROBOTSTXT_USER_AGENT", product_token
        )
        if crawl_setting(settings, "CRAWL_ROBOTS_OBEY") and settings.getbool("ROBOTSTXT_OBEY"):
            raise ConfigError(
                "ROBOTSTXT_OBEY turns on Scrapy's per-process robots.txt middleware, which "
                "fetches outside the fleet's politeness; crawlproject obeys robots.txt "
                "through CRAWL_ROBOTS_OBEY. Leave ROBOTSTXT_OBEY off."
            )
        config = read_config(cls, settings, user_agent_token=token)
        config.warn_unless_in(settings.get("USER_AGENT") or "")
        return config

    def validate(self) -> None:
        if not PRODUCT_TOKEN_RE.fullmatch(self.user_agent_token):
            raise ConfigError(
                f"CRAWL_ROBOTS_USER_AGENT {self.user_agent_token!r} must be a product token: "
                "letters, '_' and '-' only (RFC 9309 2.2.1)"
            )
        if not 0 < self.ttl_seconds <= 86400:
            raise ConfigError("CRAWL_ROBOTS_TTL_SECONDS must be within (0, 86400] (RFC 9309 2.4)")
        if self.max_bytes < 500 * 1024:
            raise ConfigError("CRAWL_ROBOTS_MAX_BYTES must be at least 500 KiB (RFC 9309 2.5)")
        if self.max_redirects < 5:
            raise ConfigError("CRAWL_ROBOTS_MAX_REDIRECTS must be at least 5 (RFC 9309 2.3.1.2)")
        if self.crawl_delay_max_seconds < 0:
            raise ConfigError("CRAWL_ROBOTS_CRAWL_DELAY_MAX_SECONDS must be >= 0")
        if not 0 < self.retry_seconds <= self.retry_max_seconds:
            raise ConfigError(
                "CRAWL_ROBOTS_RETRY_SECONDS must be > 0 and <= CRAWL_ROBOTS_RETRY_MAX_SECONDS"
            )
        if self.defer_retries < 0 or self.outage_seconds <= 0 or self.local_cache_size < 1:
            raise ConfigError(
                "CRAWL_ROBOTS_DEFER_RETRIES must be >= 0, CRAWL_ROBOTS_OUTAGE_SECONDS > 0 "
                "and CRAWL_ROBOTS_LOCAL_CACHE >= 1"
            )

    def warn_unless_in(self, user_agent: str) -> None:
        """Warns when the User-Agent header will not carry the product token."""
        if self.obey and self.user_agent_token.lower() not in user_agent.lower():
            # RFC 9309 2.2.1: the token SHOULD be part of the User-Agent header.
            logger.warning(
                "USER_AGENT %r does not contain the robots.txt product token %r "
                "(CRAWL_ROBOTS_USER_AGENT): sites cannot tell which rules apply to it",
                user_agent,
                self.user_agent_token,
            )
