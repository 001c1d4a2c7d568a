"""Settings read as the user meant them (issue 41, item 2).

A misspelt name (``-s CRAWL_HOST_DELAI=1``, a spider's ``custom_settings``,
the environment) is one WARNING with the closest known name, and the crawl
goes on; a value that cannot be read as its setting's declared type
(``-s CRAWL_HOST_DELAY=abc``) is one line, exit status 1, no traceback,
nothing started: for every declared setting (walked from
crawlproject/default_settings/), in ``scrapy crawl``, under Scrapyd's runner,
and in the ``crawlproject`` command's ``-s``.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
import redis
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.settings import default_settings as scrapy_defaults

from crawlproject.commands.crawl import refusal
from crawlproject.setting_check import (
    DECLARED,
    KNOWN,
    SCRAPY_REDIS_SETTINGS,
    SCRAPY_TYPED,
    misspelt_settings,
    refuse_unreadable,
)
from testkit.crawlproc import REPO_ROOT, start_worker, wait_all
from testkit.redis_server import RedisServer
from testkit.scrapyd_server import ScrapydServer, clean_env
from testkit.testweb import TestWeb, page_counts
from tests.spiders_for_tests.setting_mistakes import MisspeltSpider, UnreadableSpider

FAST = {
    "CRAWL_HOST_DELAY": 0.05,
    "CRAWL_IDLE_CLOSE_SECONDS": 1.5,
    "CRAWL_IDLE_POLL_SECONDS": 0.2,
    "SPIDER_MODULES": "spiders,tests.spiders_for_tests",
}
CODE_DIRS = ("crawlproject", "middlewares", "pipelines", "spiders")


def project(**cmdline: object) -> Settings:
    """The project settings as a worker has them: the settings module, then -s."""
    settings = Settings()
    settings.setmodule("crawlproject.settings")
    settings.update(cmdline, priority="cmdline")
    return settings


def _arms(kind: Any) -> tuple[Any, ...]:
    if get_origin(kind) in (Union, types.UnionType):
        return tuple(a for a in get_args(kind) if a is not type(None))
    return (kind,)


def wrong_value(kind: Any) -> object:
    """A value no arm of the declared type ``kind`` reads (told here, not by the checker)."""
    bases = {get_origin(arm) or arm for arm in _arms(kind)}
    if str in bases:
        return {"not": "a string"}  # nor a whole number, true/false or a list
    if bool in bases:
        return "maybe"  # getbool: only 0/1, True/False, true/false
    if bases & {int, float}:
        return "abc"
    if bases == {dict}:
        return "abc"  # getdict: JSON that is no JSON
    assert bases == {list}, kind  # a new kind of declaration: say here what it refuses
    return 5  # getlist: no list of anything


def test_the_walk_covers_every_kind_of_declaration() -> None:
    kinds = {frozenset(get_origin(a) or a for a in _arms(k)) for k in DECLARED.values() if k}
    assert {frozenset({bool}), frozenset({int}), frozenset({float}), frozenset({str})} <= kinds
    assert {frozenset({list}), frozenset({dict})} <= kinds
    assert len(DECLARED) > 100 and "CRAWL_HOST_DELAY" in DECLARED and "REDIS_URL" in DECLARED
    assert refusal(project()) is None  # the defaults start


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_declared_setting_refuses_a_value_of_the_wrong_type_in_one_line(name: str) -> None:
    kind = DECLARED[name]
    if kind is None:  # a None default and no type: retired, refused whatever its value
        line = refusal(project(**{name: 5}))
        assert line is not None and line.startswith(f"{name} is retired"), line
        return
    value = wrong_value(kind)
    line = refusal(project(**{name: value}))
    assert line is not None and line.startswith(f"{name}={value!r}: expected "), line
    assert "\n" not in line


@pytest.mark.parametrize("name", sorted(SCRAPY_TYPED))
def test_scrapys_own_true_false_and_numeric_settings_are_refused_in_one_line_too(
    name: str,
) -> None:
    """CONCURRENT_REQUESTS=abc would end in a traceback inside Scrapy."""
    value = "maybe" if SCRAPY_TYPED[name] is bool else "abc"
    line = refusal(project(**{name: value}))
    assert line is not None and line.startswith(f"{name}={value!r}: expected "), line


@pytest.mark.parametrize(
    ("setting", "value"),
    [("DOWNLOAD_DELAY", "0.5"), ("DOWNLOAD_TIMEOUT", 7.5), ("CONCURRENT_REQUESTS", "8"),
     ("ROBOTSTXT_OBEY", "false"), ("LOG_ENABLED", 1), ("FEED_EXPORT_INDENT", None)],
)  # fmt: skip
def test_scrapys_own_settings_read_as_scrapy_reads_them(setting: str, value: object) -> None:
    refuse_unreadable(project(**{setting: value}))  # no ConfigError


@pytest.mark.parametrize(
    ("setting", "value", "line"),
    [
        ("CRAWL_HOST_DELAY", "abc", "CRAWL_HOST_DELAY='abc': expected a number (seconds)"),
        ("CRAWL_HOST_CONCURRENCY", "1.5", "CRAWL_HOST_CONCURRENCY='1.5': expected a whole number"),
        (
            "CRAWL_GUARD_ENABLED", "yes",
            "CRAWL_GUARD_ENABLED='yes': expected true or false (True/False, 1/0)",
        ),
        (
            "CRAWL_BACKOFF_HTTP_CODES", "429,too many",
            "CRAWL_BACKOFF_HTTP_CODES='429,too many': expected a list of whole numbers "
            "(comma-separated with -s)",
        ),
        (
            "CRAWL_HOST_OVERRIDES", "{'a.test': 1}",
            "CRAWL_HOST_OVERRIDES=\"{'a.test': 1}\": expected a dict (JSON with -s)",
        ),
        (
            "CRAWL_FRONTIER_SHARDS", "many",
            "CRAWL_FRONTIER_SHARDS='many': expected a whole number, or nothing (unset)",
        ),
        (
            "CRAWL_STORE_ROTATE_BYTES", "1GB",
            "CRAWL_STORE_ROTATE_BYTES='1GB': expected a whole number (bytes)",
        ),
    ],
)  # fmt: skip
def test_the_line_says_the_setting_the_value_and_what_it_expects(
    setting: str, value: str, line: str
) -> None:
    assert refusal(project(**{setting: value})) == line


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("CRAWL_GUARD_ENABLED", "0"), ("CRAWL_GUARD_ENABLED", "true"),
        ("CRAWL_GUARD_ENABLED", "False"), ("CRAWL_GUARD_ENABLED", 1),
        ("CRAWL_HOST_DELAY", "2"), ("CRAWL_HOST_DELAY", 2), ("CRAWL_HOST_CONCURRENCY", "3"),
        ("CRAWL_GUARD_ALLOW", "127.0.0.1,10.0.0.0/8"), ("CRAWL_GUARD_ALLOW", ("127.0.0.1",)),
        ("CRAWL_BACKOFF_HTTP_CODES", "429,503"), ("CRAWL_BACKOFF_HTTP_CODES", [429]),
        ("CRAWL_HOST_OVERRIDES", '{"a.test": {"delay": 2}}'),
        ("CRAWL_FRONTIER_SHARDS", ""), ("CRAWL_STORE_STATUSES", "2xx,404"),
        ("CRAWL_STORE_STATUSES", [200, "3xx"]), ("CRAWL_STORE_STATUSES", 200),
        ("CRAWL_DEDUPE_FOLLOW_DUPLICATE_LINKS", True), ("CRAWL_DATA_DIR", Path("/tmp/x")),
        ("CRAWL_DENY_HOSTS", ""),
    ],
)  # fmt: skip
def test_a_value_scrapy_reads_is_valid(setting: str, value: object) -> None:
    assert refusal(project(**{setting: value})) is None


def test_misspelt_names_get_the_closest_known_name() -> None:
    settings = project(
        CRAWL_HOST_DELAI=1, crawl_host_delay=2, CRAWL_IDLE_CLOSE=3, SCHEDULER_PERSISTS=True,
        REDIS_START_URL_KEY="x", CRAWL_WHATEVER_THIS_IS=1,
        # A user's own settings, and Scrapy's: never a warning.
        MY_PIPELINE_TOKEN="t", REDIS_PASSWORD="p", SCHEDULER_DEBUG=True, DOWNLOAD_DELAY=0,
    )  # fmt: skip
    assert misspelt_settings(settings, environ={}) == [
        "CRAWL_HOST_DELAI is not a setting of crawlproject: did you mean CRAWL_HOST_DELAY?",
        "CRAWL_IDLE_CLOSE is not a setting of crawlproject: did you mean CRAWL_IDLE_CLOSE_SECONDS?",
        "CRAWL_WHATEVER_THIS_IS is not a setting of crawlproject: docs/settings.md lists them all",
        "REDIS_START_URL_KEY is not a setting of crawlproject or scrapy-redis: did you mean "
        "REDIS_START_URLS_KEY?",
        "SCHEDULER_PERSISTS is not a setting of crawlproject or scrapy-redis: did you mean "
        "SCHEDULER_PERSIST?",
        "crawl_host_delay is not a setting of crawlproject: did you mean CRAWL_HOST_DELAY?",
    ]
    assert misspelt_settings(project(), environ={}) == []  # the project's own: none


def test_a_crawl_variable_the_environment_does_not_give_is_said() -> None:
    environ = {"CRAWL_NAEM": "quotes", "CRAWL_HOST_DELAY": "2", "CRAWL_NAME": "ok", "HOME": "/"}
    assert misspelt_settings(project(), environ=environ) == [
        "environment variable CRAWL_HOST_DELAY is not read (the environment gives only "
        "REDIS_URL, CRAWL_NAME, CRAWL_DATA_DIR): use -s CRAWL_HOST_DELAY=... or the "
        "settings module",
        "environment variable CRAWL_NAEM is not read: did you mean CRAWL_NAME?",
    ]


def test_a_spiders_custom_settings_are_checked_too() -> None:
    crawler = Crawler(MisspeltSpider, project())
    assert misspelt_settings(crawler.settings, environ={}) == [
        "CRAWL_HOST_DELAI is not a setting of crawlproject: did you mean CRAWL_HOST_DELAY?"
    ]
    crawler = Crawler(UnreadableSpider, project())
    assert refusal(crawler.settings, UnreadableSpider) == (
        "CRAWL_HOST_DELAY='one second': expected a number (seconds)"
    )


def _names_read(pattern: str) -> set[str]:
    """String literals matching ``pattern`` in the project's code (not comments)."""
    found: set[str] = set()
    for folder in CODE_DIRS:
        for path in (REPO_ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found |= set(re.findall(pattern, node.value))
    return found


def test_every_crawl_setting_the_code_reads_is_known_to_the_check() -> None:
    read = {n for n in _names_read(r"^CRAWL_[A-Z0-9_]*[A-Z0-9]$") if n != "CRAWL_"}
    assert "CRAWL_HOST_DELAY" in read and "CRAWL_NAME" in read
    assert read - KNOWN == set()


def test_every_scrapy_redis_name_the_project_reads_or_refuses_is_known() -> None:
    named = _names_read(r"^(?:REDIS|SCHEDULER|DUPEFILTER|MAX_IDLE)_[A-Z0-9_]*[A-Z0-9]$")
    assert {"REDIS_URL", "SCHEDULER_PERSIST", "REDIS_START_URLS_KEY"} <= named
    assert {"SCHEDULER_FLUSH_ON_START", "MAX_IDLE_TIME_BEFORE_CLOSE"} <= named
    scrapys_own = {n for n in dir(scrapy_defaults) if n.isupper()}
    assert named - SCRAPY_REDIS_SETTINGS - scrapys_own == set()


# --- as the user runs it ----------------------------------------------------


def crawl_keys(url: str, crawl: str) -> list[bytes]:
    with redis.Redis.from_url(url) as client:
        return sorted(client.scan_iter(match=f"cp:{{{crawl}*", count=1000))


def only_error(log: str) -> str:
    """The log's one ERROR line, after the level; the log has no traceback."""
    errors = [row.partition(" ERROR: ")[2] for row in log.splitlines() if " ERROR: " in row]
    assert len(errors) == 1, log
    assert "Traceback" not in log and "Spider opened" not in log, log
    return errors[0]


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ("CRAWL_HOST_DELAY=abc", "CRAWL_HOST_DELAY='abc': expected a number (seconds)"),
        (
            "CRAWL_ROBOTS_OBEY=maybe",
            "CRAWL_ROBOTS_OBEY='maybe': expected true or false (True/False, 1/0)",
        ),
        (
            "CRAWL_ADDRESS_OVERRIDES=none",
            "CRAWL_ADDRESS_OVERRIDES='none': expected a dict (JSON with -s)",
        ),
    ],
)  # fmt: skip
def test_scrapy_crawl_refuses_an_unreadable_value_in_one_line(
    redis_server: RedisServer, tmp_path: Path, setting: str, line: str
) -> None:
    name, _, value = setting.partition("=")
    proc = start_worker(
        REPO_ROOT, redis_server.url, "unreadable", ["http://127.0.3.1:9/"], {name: value},
        tmp_path / "w.log",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) == [1]
    assert only_error(proc.log_path.read_text()) == f"Not started: {line}"
    assert not crawl_keys(redis_server.url, "unreadable")  # nothing queued


def test_a_spiders_unreadable_custom_setting_is_refused_in_one_line(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    proc = start_worker(
        # No -s CRAWL_HOST_DELAY: the command line would win over custom_settings.
        REPO_ROOT, redis_server.url, "unreadable", [],
        {k: v for k, v in FAST.items() if k != "CRAWL_HOST_DELAY"}, tmp_path / "w.log",
        extra_args=["-a", "start=http://127.0.3.1:9/"], spider="unreadable",
    )  # fmt: skip
    assert wait_all([proc], timeout=60, check=False) == [1]
    assert only_error(proc.log_path.read_text()) == (
        "Not started: CRAWL_HOST_DELAY='one second': expected a number (seconds)"
    )


def test_misspelt_names_warn_once_and_the_crawl_goes_on(
    redis_server: RedisServer, testweb_factory: Any, tmp_path: Path
) -> None:
    web: TestWeb = testweb_factory(hosts=1, pages=4, latency_ms=0, links=2, cross_links=0)
    proc = start_worker(
        REPO_ROOT, redis_server.url, "misspelt", [], {**FAST, "SCHEDULER_PERSISTS": "True"},
        tmp_path / "w.log", extra_args=["-a", f"start={web.seeds[0]}"], spider="misspelt",
    )  # fmt: skip
    assert wait_all([proc], timeout=90) == [0]
    log = proc.log_path.read_text()
    warnings = [row.partition(" WARNING: ")[2] for row in log.splitlines() if " WARNING: " in row]
    assert [w for w in warnings if "not a setting" in w] == [
        "CRAWL_HOST_DELAI is not a setting of crawlproject: did you mean CRAWL_HOST_DELAY?",
        "SCHEDULER_PERSISTS is not a setting of crawlproject or scrapy-redis: did you mean "
        "SCHEDULER_PERSIST?",
    ], log[-3000:]
    # Nothing else changed: every page fetched, once.
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls and set(fetched.values()) == {1}, fetched


def test_scrapyds_runner_refuses_in_one_line(tmp_path: Path) -> None:
    """Scrapyd starts ``python -m scrapyd.runner crawl web`` with the egg's
    settings module: the project's COMMANDS_MODULE, so the same check."""
    env = {
        **os.environ, "SCRAPY_PROJECT": "crawlproject",
        "SCRAPY_SETTINGS_MODULE": "crawlproject.settings",  # what activate_egg sets
        "PYTHONPATH": str(REPO_ROOT),
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "scrapyd.runner", "crawl", "web", "-a", "crawl=scrapyd",
         "-s", "CRAWL_HOST_DELAI=2", "-s", "CRAWL_IDLE_CLOSE_SECONDS=soon",
         "-s", f"CRAWL_DATA_DIR={tmp_path}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert only_error(done.stderr) == (
        "Not started: CRAWL_IDLE_CLOSE_SECONDS='soon': expected a number (seconds)"
    )
    assert (
        "WARNING: CRAWL_HOST_DELAI is not a setting of crawlproject: did you mean "
        "CRAWL_HOST_DELAY?" in done.stderr
    )


def test_a_scrapyd_job_refuses_in_one_line(redis_server: RedisServer, tmp_path: Path) -> None:
    """The same through a real Scrapyd running the deployed egg (setting= fields)."""
    with ScrapydServer(tmp_path / "scrapyd") as machine:
        deploy = subprocess.run(
            [sys.executable, "-m", "crawlproject.deploy", "--url", machine.url, "--version", "1"],
            cwd=REPO_ROOT, env=clean_env(), capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        assert deploy.returncode == 0, deploy.stderr
        fields = [("project", "crawlproject"), ("spider", "web"), ("_version", "1"),
                  ("crawl", "scrapyd-mistakes"), ("seeds", "http://127.0.3.1:9/")]  # fmt: skip
        settings = {
            "REDIS_URL": redis_server.url, "CRAWL_DATA_DIR": str(tmp_path / "data"),
            "CRAWL_HOST_DELAI": "2", "CRAWL_IDLE_CLOSE_SECONDS": "soon",
        }  # fmt: skip
        fields += [("setting", f"{name}={value}") for name, value in settings.items()]
        answer = machine.post("schedule.json", fields)
        assert answer["status"] == "ok", answer
        machine.wait_finished("crawlproject", [answer["jobid"]], timeout=60)
        log = machine.job_log("crawlproject", "web", answer["jobid"]).read_text()
    assert only_error(log) == (
        "Not started: CRAWL_IDLE_CLOSE_SECONDS='soon': expected a number (seconds)"
    )
    assert "did you mean CRAWL_HOST_DELAY?" in log
    assert not crawl_keys(redis_server.url, "scrapyd-mistakes")


def test_the_crawlproject_command_refuses_an_unreadable_value_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "crawlproject", "-s", "CRAWL_REDIS_OUTAGE_SECONDS=1m",
         "-s", f"CRAWL_DATA_DIR={tmp_path}", "counts"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        "crawlproject: CRAWL_REDIS_OUTAGE_SECONDS='1m': expected a number (seconds)\n"
    )
