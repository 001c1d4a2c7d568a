"""The worker's garbage collector (crawlproject/frontier/scrapy_glue/gc_tuning.py): tuned once
per process when the frontier opens, or left to Python's defaults."""

from __future__ import annotations

import subprocess
import sys

import pytest
from scrapy.settings import Settings

from crawlproject.frontier.crawl.config import ConfigError, FrontierConfig


def test_the_worker_gc_is_tuned_once_and_can_be_left_alone() -> None:
    code = """
import gc
from crawlproject.frontier.scrapy_glue.gc_tuning import PYTHON_DEFAULT_THRESHOLD, tune_gc
assert gc.get_threshold()[0] == PYTHON_DEFAULT_THRESHOLD
assert not tune_gc(0) and gc.get_threshold()[0] == PYTHON_DEFAULT_THRESHOLD
assert gc.get_freeze_count() == 0
assert tune_gc(10_000)
assert gc.get_threshold()[0] == 10_000 and gc.get_freeze_count() > 0
assert not tune_gc(5_000) and gc.get_threshold()[0] == 10_000  # once per process
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    settings = Settings()
    settings.setmodule("crawlproject.settings")
    settings.set("CRAWL_GC_THRESHOLD", -1)
    with pytest.raises(ConfigError, match="CRAWL_GC_THRESHOLD"):
        FrontierConfig.from_settings(settings)
