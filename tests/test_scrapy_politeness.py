"""A Scrapy user's own politeness settings taken as the fleet's
(crawlproject/frontier/crawl/scrapy_politeness.py): the pure mapping, settings in
and settings out, its refusals, and the add-on inside a real Crawler (before
Scrapy's own bridge of the ``download_delay`` attribute and the freeze)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler, get_reactor_settings

from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig
from crawlproject.frontier.crawl.host_overrides import HostOverride
from crawlproject.frontier.crawl.scrapy_politeness import (
    ScrapyPoliteness,
    take_scrapy_politeness,
)
from testkit.crawlproc import REPO_ROOT, start_worker, wait_all
from testkit.testweb import TestWeb, page_counts, politeness_report
from tests.spiders_for_tests.polite_spiders import DELAY

# The web server logs time.time() in its own thread: a little slack for the clock.
CLOCK_SLACK = 0.02
QUICK = {
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
}


def _settings(spider: type[Spider] | None = None, **cmdline: object) -> Settings:
    """As a worker's crawler holds them: the project's, the spider's
    custom_settings, then ``-s`` values."""
    s = Settings()
    s.setmodule("crawlproject.settings", priority="project")
    if spider is not None:
        spider.update_settings(s)
    s.setdict(cmdline, priority="cmdline")
    return s


class _Custom(Spider):
    name = "custom"
    custom_settings: ClassVar[dict[str, Any]] = {
        "DOWNLOAD_DELAY": 0.3,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
        "AUTOTHROTTLE_ENABLED": True,
        "AUTOTHROTTLE_MAX_DELAY": 12,
    }


class _Attributes(Spider):
    name = "attributes"
    download_delay = 2
    max_concurrent_requests = 3


def test_custom_settings_become_the_fleets() -> None:
    s = _settings(_Custom)
    taken = take_scrapy_politeness(s, _Custom)
    assert s.getfloat("CRAWL_HOST_DELAY") == 0.3 and s.getfloat("DOWNLOAD_DELAY") == 0
    # At most 2 at once per host, fleet-wide; Scrapy's own cap out of the way.
    assert s.getint("CRAWL_HOST_CONCURRENCY") == 2
    assert s.getint("CONCURRENT_REQUESTS_PER_DOMAIN") == s.getint("CONCURRENT_REQUESTS") == 32
    assert not s.getbool("AUTOTHROTTLE_ENABLED")
    assert s.getfloat("CRAWL_ADAPTIVE_DELAY_MAX_SECONDS") == 12
    assert len(taken) == 4
    line = taken[0].message % taken[0].args
    assert line.startswith("DOWNLOAD_DELAY = 0.3 taken as CRAWL_HOST_DELAY = 0.3"), line
    # Once taken, nothing is left to take (the start check runs it before the add-on).
    assert take_scrapy_politeness(s, _Custom) == []
    config = FrontierConfig.from_settings(s)
    assert config.host_delay_ms == 300 and config.host_concurrency == 2


def test_spider_attributes_and_command_line() -> None:
    s = _settings(_Attributes)
    take_scrapy_politeness(s, _Attributes)
    assert s.getfloat("CRAWL_HOST_DELAY") == 2 and s.getfloat("DOWNLOAD_DELAY") == 0
    assert s.getint("CRAWL_HOST_CONCURRENCY") == 3
    # -s DOWNLOAD_DELAY wins over the attribute, as in Scrapy.
    s = _settings(_Attributes, DOWNLOAD_DELAY=0.5)
    take_scrapy_politeness(s, _Attributes)
    assert s.getfloat("CRAWL_HOST_DELAY") == 0.5 and s.getfloat("DOWNLOAD_DELAY") == 0


def test_what_the_user_did_not_set_is_left_alone() -> None:
    s = _settings()
    before = s.copy_to_dict()
    assert take_scrapy_politeness(s, Spider) == []
    assert s.copy_to_dict() == before
    # 0 or a cap not below the process's whole concurrency ask nothing of the fleet.
    s = _settings(DOWNLOAD_DELAY=0, CONCURRENT_REQUESTS_PER_DOMAIN=64)
    assert take_scrapy_politeness(s) == []
    assert s.getfloat("CRAWL_HOST_DELAY") == 1.0 and s.getint("CRAWL_HOST_CONCURRENCY") == 1
    # Without the frontier (plain Scrapy, a baseline) Scrapy's own is all there is.
    s = _settings(_Custom, SCHEDULER="scrapy.core.scheduler.Scheduler")
    assert take_scrapy_politeness(s, _Custom) == []
    assert s.getfloat("DOWNLOAD_DELAY") == 0.3 and s.getbool("AUTOTHROTTLE_ENABLED")
    # The same value given twice is no conflict.
    s = _settings(DOWNLOAD_DELAY=2, CRAWL_HOST_DELAY=2)
    take_scrapy_politeness(s)
    assert s.getfloat("CRAWL_HOST_DELAY") == 2 and s.getfloat("DOWNLOAD_DELAY") == 0


def test_download_slots_become_host_overrides() -> None:
    slots = {"a.example": {"delay": 4, "concurrency": 2, "jitter": 0.5}, "b.example": {"jitter": 0}}
    s = _settings(DOWNLOAD_SLOTS=slots, CRAWL_HOST_OVERRIDES={"c.example": {"delay": 9}})
    take_scrapy_politeness(s)
    assert s.getdict("DOWNLOAD_SLOTS") == {}
    config = FrontierConfig.from_settings(s)
    assert config.host_overrides == {
        "a.example": HostOverride(4.0, 2),
        "c.example": HostOverride(9.0, None),
    }


@pytest.mark.parametrize(
    ("cmdline", "message"),
    [
        ({"DOWNLOAD_DELAY": 1, "CRAWL_HOST_DELAY": 0.2}, r"DOWNLOAD_DELAY \(1.0\) is taken as"),
        (
            {"CONCURRENT_REQUESTS_PER_DOMAIN": 2, "CRAWL_HOST_CONCURRENCY": 4},
            "taken as CRAWL_HOST_CONCURRENCY, which is set to 4",
        ),
        ({"CONCURRENT_REQUESTS_PER_DOMAIN": 0}, "must be >= 1"),
        ({"AUTOTHROTTLE_ENABLED": True, "CRAWL_ADAPTIVE_DELAY_FACTOR": 0}, "FACTOR = 0"),
        (
            {"AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_MAX_DELAY": 9},
            None,  # fine: not set on the crawl's side
        ),
        (
            {
                "AUTOTHROTTLE_ENABLED": True,
                "AUTOTHROTTLE_MAX_DELAY": 9,
                "CRAWL_ADAPTIVE_DELAY_MAX_SECONDS": 20,
            },
            "AUTOTHROTTLE_MAX_DELAY",
        ),
        ({"DOWNLOAD_SLOTS": {"a.example": {"delay": 1, "speed": 2}}}, "DOWNLOAD_SLOTS"),
        ({"DOWNLOAD_SLOTS": {"a.example/x": {"delay": 1}}}, "DOWNLOAD_SLOTS cannot be taken"),
        (
            {
                "DOWNLOAD_SLOTS": {"a.example": {"delay": 1}},
                "CRAWL_HOST_OVERRIDES": {"http://a.example": {"delay": 3}},
            },
            "different values",
        ),
    ],
)
def test_conflicts_are_refused_in_one_line(cmdline: dict[str, object], message: str | None) -> None:
    s = _settings(**cmdline)
    if message is None:
        take_scrapy_politeness(s)
        FrontierConfig.from_settings(s)
        return
    for check in (take_scrapy_politeness, FrontierConfig.from_settings):  # add-on, start check
        with pytest.raises(ConfigError, match=message) as refused:
            check(_settings(**cmdline))
        assert "\n" not in str(refused.value)


def test_project_level_values_are_still_refused() -> None:
    """The project's own settings say 0 on purpose: changed there, they are not
    a spider's wish, and without the add-on nothing is taken at all."""
    for name, value in (("DOWNLOAD_DELAY", 1), ("AUTOTHROTTLE_ENABLED", True)):
        s = _settings()
        s.set(name, value, priority="project")
        with pytest.raises(ConfigError, match=name):
            FrontierConfig.from_settings(s)
    s = _settings(DOWNLOAD_DELAY=1, ADDONS={})
    with pytest.raises(ConfigError, match="DOWNLOAD_DELAY must be 0"):
        FrontierConfig.from_settings(s)


def test_the_add_on_runs_before_scrapys_attribute_bridge_and_the_freeze() -> None:
    frontier = {"SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler"}
    addon = {**frontier, "ADDONS": {ScrapyPoliteness: 0}}
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        crawler = get_crawler(_Attributes, addon)
    s = crawler.settings
    assert s.frozen
    assert s.getfloat("CRAWL_HOST_DELAY") == 2 and s.getfloat("DOWNLOAD_DELAY") == 0
    assert s.getint("CRAWL_HOST_CONCURRENCY") == 3
    assert s.getint("CONCURRENT_REQUESTS_PER_DOMAIN") >= 3
    # Without the add-on Scrapy bridges the attribute onto its own per-process delay.
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        plain = get_crawler(_Attributes, frontier)
    assert plain.settings.getfloat("DOWNLOAD_DELAY") == 2


@pytest.mark.parametrize("spider", ["polite_tutorial", "polite_attribute"])
def test_a_tutorial_spiders_delay_holds_fleet_wide(
    spider: str, redis_url: str, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    """``custom_settings = {"DOWNLOAD_DELAY": 0.3}`` (or ``download_delay = 0.3``),
    two workers on two hosts: it starts, every page is fetched once, and no two
    requests to a host (robots.txt included) start closer than 0.3 s, whichever
    worker sent them."""
    web = testweb_factory(hosts=2, pages=6, links=2, cross_links=0)
    start = ",".join(web.base_url(i) for i in (1, 2))
    procs = [
        start_worker(
            REPO_ROOT, redis_url, None, [], QUICK, tmp_path / f"w{i}.log",
            extra_args=["-a", "start=" + start], spider=spider,
        )
        for i in range(2)
    ]  # fmt: skip
    assert wait_all(procs, timeout=120) == [0, 0]
    counts = page_counts(web.log)
    assert set(counts) == web.expected_urls and max(counts.values()) == 1, counts
    report = politeness_report(web.log, DELAY, tolerance=CLOCK_SLACK)
    assert len(report) == 2
    for host, p in report.items():
        assert p.requests >= 2 and p.gaps_below_delay == 0, (host, p)
    source = "DOWNLOAD_DELAY" if spider == "polite_tutorial" else "spider attribute download_delay"
    for proc in procs:
        log = proc.log_path.read_text()
        assert f"{source} = 0.3 taken as CRAWL_HOST_DELAY = 0.3" in log
        assert "Not started" not in log and "Traceback" not in log
        # The frontier's delay is the user's; Scrapy's own is back at its default, 0.
        assert "shared Redis, delay 0.300 s" in log
        overridden = log.split("Overridden settings:", 1)[1].split("}", 1)[0]
        assert "'DOWNLOAD_DELAY'" not in overridden


class _InstanceAttribute(Spider):
    name = "instance"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.download_delay = 0.7


def test_an_instance_attribute_set_in_init_is_taken_too() -> None:
    """Scrapy 2.19 reads ``download_delay`` once, from the spider instance,
    right after the add-ons (crawler.crawl() makes the spider first)."""
    frontier = {"SCHEDULER": "crawlproject.frontier.scheduler.FrontierScheduler"}
    settings = {"TELNETCONSOLE_ENABLED": False, **get_reactor_settings(), **frontier}
    crawler = Crawler(_InstanceAttribute, {**settings, "ADDONS": {ScrapyPoliteness: 0}})
    crawler.spider = _InstanceAttribute()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        crawler._apply_settings()
    assert crawler.settings.getfloat("CRAWL_HOST_DELAY") == 0.7
    assert crawler.settings.getfloat("DOWNLOAD_DELAY") == 0


def test_a_conflict_with_a_class_attribute_stops_the_start_in_one_line(
    redis_url: str, tmp_path: Path
) -> None:
    """The start check runs before the add-on: it reads the spider class too."""
    proc = start_worker(
        REPO_ROOT, redis_url, None, [], {**QUICK, "CRAWL_HOST_DELAY": 0.1}, tmp_path / "w.log",
        extra_args=["-a", "start=http://127.0.3.1:9/"], spider="polite_attribute",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) == [1]
    log = proc.log_path.read_text()
    assert (
        "Not started: spider attribute download_delay (0.3) is taken as CRAWL_HOST_DELAY, "
        "which is set to 0.1: set only one" in log
    )
    assert "Traceback" not in log
