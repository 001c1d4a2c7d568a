"""The crawl a spider joins (crawlproject/frontier/crawl/crawl_name.py): -a crawl=,
then CRAWL_NAME (setting or environment), then the spider's name."""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.settings import Settings

from crawlproject.frontier.crawl.crawl_name import CrawlName, crawl_name, crawl_name_of
from crawlproject.frontier.scrapy_glue.opening_lines import sources_line
from crawlproject.setting_values import ConfigError


class Shop(Spider):
    name = "shop"


class Named(Spider):
    name = "has space"


def project_settings(**values: object) -> Settings:
    settings = Settings()
    for name, value in values.items():
        settings.set(name, value, priority="project")
    return settings


def test_a_spider_without_a_crawl_name_gets_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRAWL_NAME", raising=False)
    assert crawl_name_of(Shop(), project_settings()) == CrawlName("shop", "spider name")
    assert crawl_name(Spider(name="web"), project_settings()) == "web"
    # Two spiders of one project: two crawls, hence two key spaces.
    assert crawl_name(Shop(), Settings()) != crawl_name(Spider(name="web"), Settings())


def test_spider_argument_wins_over_setting_and_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRAWL_NAME", raising=False)
    settings = project_settings(CRAWL_NAME="fromsetting")
    # -a crawl=web on a spider that does not take the argument: Scrapy sets spider.crawl.
    assert crawl_name_of(Shop(crawl="web"), settings) == CrawlName("web", "spider argument")
    spider = Shop()
    spider.crawl_name = "old"  # what spiders/web.py sets from its crawl argument
    assert crawl_name(spider, settings) == "old"
    assert crawl_name_of(Shop(), settings) == CrawlName("fromsetting", "setting")


def test_environment_is_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAWL_NAME", "envcrawl")
    settings = project_settings(CRAWL_NAME="envcrawl")  # what settings.py copies in
    assert crawl_name_of(Shop(), settings) == CrawlName("envcrawl", "environment")
    settings.set("CRAWL_NAME", "envcrawl", priority="cmdline")  # -s with the same value
    assert crawl_name_of(Shop(), settings).source == "setting"


def test_cli_without_spider_keeps_web(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRAWL_NAME", raising=False)
    assert crawl_name_of(None, project_settings()) == CrawlName("web", "default")
    assert crawl_name(None, project_settings(CRAWL_NAME="news")) == "news"


def test_a_name_that_cannot_name_a_crawl_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CRAWL_NAME", raising=False)
    with pytest.raises(ConfigError, match="set CRAWL_NAME or -a crawl=NAME"):
        crawl_name(Named(), project_settings())
    assert crawl_name(Named(crawl="fine"), project_settings()) == "fine"


def test_the_start_line_says_where_the_name_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRAWL_NAME", raising=False)
    monkeypatch.delenv("CRAWL_DATA_DIR", raising=False)
    settings = project_settings()
    line = sources_line(settings, None, "", crawl_name_of(Shop(), settings), "crawl-data")
    assert "CRAWL_NAME='shop' (spider name), CRAWL_DATA_DIR='crawl-data' (default)" in line
