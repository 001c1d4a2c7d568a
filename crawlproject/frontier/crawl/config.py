"""The frontier's settings, read once and checked together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from redis.asyncio import Redis
from scrapy.settings import BaseSettings

from crawlproject.frontier.crawl import scrapy_politeness
from crawlproject.frontier.crawl.address_settings import AddressConfig
from crawlproject.frontier.crawl.host_overrides import HostOverride, read_host_overrides
from crawlproject.frontier.crawl.redis_settings import (
    redis_target,
    refuse_scrapy_redis,
    start_urls_key,
)
from crawlproject.frontier.store.crawl_layout import NEW_CRAWL_SHARDS, crawl_layout
from crawlproject.frontier.store.hash_slots import EVEN, HASH_SLOTS
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import AdaptiveDelay, HostBudget
from crawlproject.frontier.store.seen_set import SeenFilter
from crawlproject.setting_values import ConfigError, Setting, crawl_setting, read_config

__all__ = ["ConfigError", "FrontierConfig", "HostOverride"]


def politeness_key_of(setting: str) -> str:
    """The key host queues live under: ``host`` in address mode too."""
    return "host" if setting == "address" else setting


@dataclass(frozen=True)
class FrontierConfig:
    """The frontier's settings: each field annotated with a Setting is that
    ``CRAWL_*`` setting (read by read_config); the others are computed from
    several settings or are Scrapy's own (from_settings)."""

    redis_url: str | None
    # Where redis_url came from, for the start's log line (redis_settings.py).
    redis_source: str
    data_dir: Annotated[str, Setting("CRAWL_DATA_DIR")]
    # REDIS_START_URLS_KEY (%(name)s: the crawl) and SCHEDULER_PERSIST, as in scrapy-redis.
    start_urls_template: str | None
    persist: bool
    host_delay_seconds: Annotated[float, Setting("CRAWL_HOST_DELAY")]
    host_concurrency: Annotated[int, Setting("CRAWL_HOST_CONCURRENCY")]
    host_overrides: dict[str, HostOverride]  # CRAWL_HOST_OVERRIDES
    politeness_key: str  # CRAWL_POLITENESS_KEY, "host" in address mode (politeness_key_of)
    lease_seconds: Annotated[float, Setting("CRAWL_LEASE_SECONDS")]
    idle_close_seconds: Annotated[float, Setting("CRAWL_IDLE_CLOSE_SECONDS")]
    # CRAWL_FRONTIER_SHARDS, None when not set: the crawl's own count (open_keys).
    shards: int | None
    seen: SeenFilter  # CRAWL_SEEN_FILTER, _CAPACITY, _ERROR_RATE (checked there)
    session_params: tuple[str, ...]  # CRAWL_SESSION_PARAMS
    request_classes: tuple[str, ...]  # CRAWL_REQUEST_CLASSES
    idle_poll_seconds: Annotated[float, Setting("CRAWL_IDLE_POLL_SECONDS")]
    flush_interval_seconds: Annotated[float, Setting("CRAWL_FLUSH_INTERVAL_SECONDS")]
    claim_prefetch: Annotated[int, Setting("CRAWL_CLAIM_PREFETCH")]
    concurrent_requests: int  # Scrapy's CONCURRENT_REQUESTS
    local_seen_size: Annotated[int, Setting("CRAWL_LOCAL_SEEN_SIZE")]
    known_links_size: Annotated[int, Setting("CRAWL_KNOWN_LINKS_SIZE")]
    sent_votes_size: Annotated[int, Setting("CRAWL_SENT_VOTES_SIZE")]
    gc_threshold: Annotated[int, Setting("CRAWL_GC_THRESHOLD")]
    adaptive_delay_factor: Annotated[float, Setting("CRAWL_ADAPTIVE_DELAY_FACTOR")]
    adaptive_delay_max_seconds: Annotated[float, Setting("CRAWL_ADAPTIVE_DELAY_MAX_SECONDS")]
    backoff_http_codes: frozenset[int]  # CRAWL_BACKOFF_HTTP_CODES
    backoff_max_seconds: Annotated[float, Setting("CRAWL_BACKOFF_MAX_SECONDS")]
    priority_policy: Annotated[str, Setting("CRAWL_PRIORITY_POLICY")]
    aopic_tax: Annotated[float, Setting("CRAWL_AOPIC_TAX")]
    aopic_seed_credit: Annotated[float, Setting("CRAWL_AOPIC_SEED_CREDIT")]
    max_depth: Annotated[int, Setting("CRAWL_MAX_DEPTH")]
    max_pages_per_host: Annotated[int, Setting("CRAWL_MAX_PAGES_PER_HOST")]
    max_urls_per_pattern: Annotated[int, Setting("CRAWL_MAX_URLS_PER_PATTERN")]
    max_reclaims: Annotated[int, Setting("CRAWL_MAX_RECLAIMS")]
    host_budget: Annotated[int, Setting("CRAWL_HOST_BUDGET")]
    host_budget_seed_votes: Annotated[int, Setting("CRAWL_HOST_BUDGET_SEED_VOTES")]
    trap_token_urls: Annotated[int, Setting("CRAWL_TRAP_TOKEN_URLS")]
    trap_token_repeat_rate: Annotated[float, Setting("CRAWL_TRAP_TOKEN_REPEAT_RATE")]
    # Politeness per server: CRAWL_ADDRESS_*, CRAWL_POLITENESS_KEY = "address".
    addresses: AddressConfig

    @property
    def budget(self) -> HostBudget:
        return HostBudget(
            base=self.host_budget,
            seed_votes=self.host_budget_seed_votes,
            token_urls=self.trap_token_urls,
            token_repeat_permille=round(self.trap_token_repeat_rate * 1000),
        )

    @property
    def host_delay_ms(self) -> int:
        return round(self.host_delay_seconds * 1000)

    @property
    def adaptive(self) -> AdaptiveDelay:
        return AdaptiveDelay(
            factor=self.adaptive_delay_factor,
            max_ms=round(self.adaptive_delay_max_seconds * 1000),
            backoff_max_ms=round(self.backoff_max_seconds * 1000),
        )

    @property
    def max_claims_in_flight(self) -> int:
        """Claimed URLs a worker holds at most: its downloader's and the prefetched."""
        return self.concurrent_requests + self.claim_prefetch

    @property
    def lease_ms(self) -> int:
        return round(self.lease_seconds * 1000)

    def crawl_keys(self, crawl: str, shards: int | None = None, tags: str = EVEN) -> CrawlKeys:
        """The key names of crawl ``crawl`` (its seed list per REDIS_START_URLS_KEY)
        over ``shards`` shards, else CRAWL_FRONTIER_SHARDS, else a new crawl's
        count, with ``tags`` (a new crawl's): open_keys gives those of a crawl
        that exists."""
        template = self.start_urls_template
        seeds = None if template is None else template % {"name": crawl}
        return CrawlKeys(crawl, shards or self.shards or NEW_CRAWL_SHARDS, seeds, tags)

    async def open_keys(self, redis: Redis, crawl: str, adopt: bool = False) -> CrawlKeys:
        """The key names of crawl ``crawl`` over the shards it was created with,
        and their tag scheme (layout.crawl_layout, from its meta: a worker that
        set another count is refused unless ``adopt``, as a command is, which
        reads the crawl as it is)."""
        provisional = self.crawl_keys(crawl, 1)  # its meta's name only
        shards, tags = await crawl_layout(redis, provisional, self.shards, adopt)
        return self.crawl_keys(crawl, shards, tags)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FrontierConfig:
        refuse_scrapy_redis(settings)
        politeness = crawl_setting(settings, "CRAWL_POLITENESS_KEY")
        overrides = read_host_overrides(settings.getdict("CRAWL_HOST_OVERRIDES") or {}, politeness)
        target = redis_target(settings)
        template = settings.get("REDIS_START_URLS_KEY") or None
        if template is not None:
            start_urls_key(settings, "web")  # refuses a template it cannot expand
        config = read_config(
            cls,
            settings,
            redis_url=target.url,
            redis_source=target.source,
            start_urls_template=template,
            persist=settings.getbool("SCHEDULER_PERSIST", True),
            host_overrides=overrides,
            # Address mode queues per host (an address is known only at claim
            # time): its slot per address is addresses.by_address.
            politeness_key=politeness_key_of(politeness),
            seen=SeenFilter.from_settings(settings),
            session_params=tuple(crawl_setting(settings, "CRAWL_SESSION_PARAMS")),
            request_classes=tuple(crawl_setting(settings, "CRAWL_REQUEST_CLASSES")),
            shards=read_shards(settings),
            concurrent_requests=settings.getint("CONCURRENT_REQUESTS", 16),
            backoff_http_codes=frozenset(
                int(c) for c in crawl_setting(settings, "CRAWL_BACKOFF_HTTP_CODES")
            ),
            addresses=AddressConfig.from_settings(settings),
        )
        refuse_scrapy_politeness(settings, config.host_concurrency)
        return config

    def validate(self) -> None:
        if self.host_delay_seconds < 0:
            raise ConfigError("CRAWL_HOST_DELAY must be >= 0")
        if self.host_concurrency < 1:
            raise ConfigError("CRAWL_HOST_CONCURRENCY must be >= 1")
        if self.politeness_key not in ("host", "domain"):
            raise ConfigError("CRAWL_POLITENESS_KEY must be 'host', 'domain' or 'address'")
        if self.lease_seconds < 1:
            raise ConfigError("CRAWL_LEASE_SECONDS must be >= 1 (leases are renewed at 1/3)")
        if self.adaptive_delay_factor < 0 or self.adaptive_delay_max_seconds < 0:
            raise ConfigError("CRAWL_ADAPTIVE_DELAY_FACTOR and _MAX_SECONDS must be >= 0")
        if self.backoff_max_seconds < 1:
            raise ConfigError("CRAWL_BACKOFF_MAX_SECONDS must be >= 1")
        if not 0 <= self.aopic_tax < 1:
            raise ConfigError("CRAWL_AOPIC_TAX must be within [0, 1)")
        if self.aopic_seed_credit <= 0:
            raise ConfigError("CRAWL_AOPIC_SEED_CREDIT must be > 0")
        if not 0 <= self.trap_token_repeat_rate < 1:
            raise ConfigError("CRAWL_TRAP_TOKEN_REPEAT_RATE must be within [0, 1)")
        for name in (
            "max_depth",
            "max_pages_per_host",
            "max_urls_per_pattern",
            "max_reclaims",
            "host_budget",
            "host_budget_seed_votes",
            "trap_token_urls",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"CRAWL_{name.upper()} must be >= 0 (0: no limit)")
        if not self.priority_policy:
            raise ConfigError("CRAWL_PRIORITY_POLICY must be 'depth', 'aopic' or a class path")
        if self.idle_close_seconds < 0:
            raise ConfigError("CRAWL_IDLE_CLOSE_SECONDS must be >= 0")
        if self.claim_prefetch < 0:
            raise ConfigError("CRAWL_CLAIM_PREFETCH must be >= 0")
        if self.gc_threshold < 0:
            raise ConfigError("CRAWL_GC_THRESHOLD must be >= 0 (0: Python's own)")
        if self.local_seen_size < 0 or self.known_links_size < 0:
            raise ConfigError(
                "CRAWL_LOCAL_SEEN_SIZE and CRAWL_KNOWN_LINKS_SIZE must be >= 0 (0: off)"
            )
        if self.sent_votes_size < 2:
            raise ConfigError("CRAWL_SENT_VOTES_SIZE must be >= 2 (vote, host) pairs")
        for host, o in self.host_overrides.items():
            if (o.delay_seconds is not None and o.delay_seconds < 0) or (
                o.concurrency is not None and o.concurrency < 1
            ):
                raise ConfigError(f"CRAWL_HOST_OVERRIDES[{host!r}] out of range")


def read_shards(settings: BaseSettings) -> int | None:
    """CRAWL_FRONTIER_SHARDS: None when not set (the crawl's count), else a count >= 1."""
    value = crawl_setting(settings, "CRAWL_FRONTIER_SHARDS")
    if value is None or value == "":
        return None
    try:
        shards = int(value)
    except (TypeError, ValueError):
        shards = 0
    # At most one shard a slot: a shard's tag sits in its own run of slots (hash_slots.py).
    if not 1 <= shards <= HASH_SLOTS or str(value).strip() != str(shards):
        raise ConfigError(
            f"CRAWL_FRONTIER_SHARDS must be a whole number within 1..{HASH_SLOTS}, or unset (the "
            f"crawl's own count, {NEW_CRAWL_SHARDS} for a new crawl); not {value!r}"
        )
    return shards


def refuse_scrapy_politeness(settings: BaseSettings, host_concurrency: int) -> None:
    """Refuses Scrapy's own per-process politeness settings where they would
    throttle hosts a second time, on top of the frontier's fleet-wide one:
    those the add-on (scrapy_politeness.py) does not take as the fleet's, i.e.
    set in the project's settings rather than by the user's spider or ``-s``,
    or all of them when the add-on is not in ADDONS."""
    taken = scrapy_politeness.as_taken(settings)
    if taken is not settings:
        settings, host_concurrency = taken, crawl_setting(taken, "CRAWL_HOST_CONCURRENCY")
    # Scrapy's own per-process delay would stack on top of the fleet-wide one.
    if settings.getfloat("DOWNLOAD_DELAY") > 0:
        raise ConfigError(
            "DOWNLOAD_DELAY must be 0 in the project's settings with the shared frontier: "
            "set CRAWL_HOST_DELAY (fleet-wide) instead, or DOWNLOAD_DELAY in the spider's "
            "custom_settings or with -s, which is taken as CRAWL_HOST_DELAY"
        )
    if settings.getbool("AUTOTHROTTLE_ENABLED"):
        raise ConfigError(
            "AUTOTHROTTLE_ENABLED in the project's settings conflicts with the frontier's "
            "fleet-wide politeness (its adaptive delay: CRAWL_ADAPTIVE_DELAY_FACTOR); in the "
            "spider's custom_settings or with -s it is taken as that"
        )
    if any(
        float(spec.get("delay") or 0) > 0 for spec in settings.getdict("DOWNLOAD_SLOTS").values()
    ):
        raise ConfigError(
            "DOWNLOAD_SLOTS delays in the project's settings would stack on the fleet-wide "
            "one: set CRAWL_HOST_OVERRIDES instead"
        )
    per_domain = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
    if per_domain < host_concurrency:
        raise ConfigError(
            f"CONCURRENT_REQUESTS_PER_DOMAIN ({per_domain}) is below "
            f"CRAWL_HOST_CONCURRENCY ({host_concurrency}); Scrapy would throttle "
            "hosts a second time"
        )
