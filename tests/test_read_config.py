"""Config dataclasses read through crawlproject/setting_values.py's read_config:
each field annotated with a Setting takes that CRAWL_* setting (parsed by its
declared default's type), the others come from the caller, and validate() refuses
a wrong value in one line."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated

import pytest
from scrapy.settings import Settings

from crawlproject import default_settings
from crawlproject.dedupe.config import DedupeConfig
from crawlproject.dns.resolver import DnsConfig
from crawlproject.frontier.crawl.address_settings import AddressConfig
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.seen_set import SeenFilter
from crawlproject.guard.policy import GuardPolicy
from crawlproject.recrawl.config import RecrawlConfig
from crawlproject.robots.config import RobotsConfig
from crawlproject.setting_values import ConfigError, Setting, _settings_of, read_config
from crawlproject.status.reporter import StatusReporterConfig
from crawlproject.store.config import BodyStoreConfig, StoreConfig
from middlewares.path_ascending import PathAscendingConfig

CONFIGS = (
    AddressConfig,
    DedupeConfig,
    DnsConfig,
    FrontierConfig,
    GuardPolicy,
    RecrawlConfig,
    RobotsConfig,
    SeenFilter,
    StatusReporterConfig,
    BodyStoreConfig,
    StoreConfig,
    PathAscendingConfig,
)


@dataclass(frozen=True, slots=True)
class Sample:
    batch: Annotated[int, Setting("CRAWL_RECRAWL_BATCH")]
    poll_seconds: Annotated[float, Setting("CRAWL_RECRAWL_POLL_SECONDS")]
    label: str
    checked: bool = False

    def validate(self) -> None:
        if self.batch < 1:
            raise ConfigError("CRAWL_RECRAWL_BATCH must be >= 1")


def test_a_setting_is_parsed_by_its_default_and_the_rest_is_given() -> None:
    config = read_config(Sample, Settings({"CRAWL_RECRAWL_BATCH": "7"}), label="x")
    assert config == Sample(7, default_settings.CRAWL_RECRAWL_POLL_SECONDS, "x")
    assert isinstance(config.poll_seconds, float)


def test_validate_runs_and_refuses_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^CRAWL_RECRAWL_BATCH must be >= 1$"):
        read_config(Sample, Settings({"CRAWL_RECRAWL_BATCH": 0}), label="x")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_every_config_names_declared_settings_and_reads_with_defaults(config: type) -> None:
    named = _settings_of(config)
    assert named, f"{config.__name__} reads no setting through read_config"
    for field_name, setting in named:
        assert setting.startswith("CRAWL_") and hasattr(default_settings, setting), setting
        assert field_name in {f.name for f in fields(config)}
    assert isinstance(config.from_settings(Settings()), config)  # type: ignore[attr-defined]
