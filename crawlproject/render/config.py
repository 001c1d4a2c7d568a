"""The rendering settings (``CRAWL_RENDER*``, ``CRAWL_BROWSER_PATH``), read once."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Annotated

from scrapy.settings import BaseSettings

from crawlproject.setting_values import ConfigError, Setting, read_config

RENDER_MODES = ("auto", "never", "always")
# Looked up on PATH, in order, when CRAWL_BROWSER_PATH is empty (Debian's
# package installs /usr/bin/chromium).
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")


@dataclass(frozen=True)
class RenderConfig:
    mode: Annotated[str, Setting("CRAWL_RENDER")]
    browser_setting: Annotated[str, Setting("CRAWL_BROWSER_PATH")]
    concurrency: Annotated[int, Setting("CRAWL_RENDER_CONCURRENCY")]
    timeout_seconds: Annotated[float, Setting("CRAWL_RENDER_TIMEOUT_SECONDS")]
    sample_every: Annotated[int, Setting("CRAWL_RENDER_SAMPLE_EVERY")]
    max_handbacks: Annotated[int, Setting("CRAWL_RENDER_MAX_HANDBACKS")]
    browser_max_mb: Annotated[int, Setting("CRAWL_RENDER_BROWSER_MAX_MB")]
    browser_max_renders: Annotated[int, Setting("CRAWL_RENDER_BROWSER_MAX_RENDERS")]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RenderConfig:
        return read_config(cls, settings)

    def validate(self) -> None:
        if self.mode not in RENDER_MODES:
            raise ConfigError(f"CRAWL_RENDER {self.mode!r} is not one of {', '.join(RENDER_MODES)}")
        if self.concurrency < 1:
            raise ConfigError("CRAWL_RENDER_CONCURRENCY must be at least 1")
        if self.timeout_seconds <= 0:
            raise ConfigError("CRAWL_RENDER_TIMEOUT_SECONDS must be above 0")
        if self.sample_every < 0:
            raise ConfigError("CRAWL_RENDER_SAMPLE_EVERY must be 0 (never) or more")
        if self.max_handbacks < 0:
            raise ConfigError("CRAWL_RENDER_MAX_HANDBACKS must be 0 (never hand back) or more")
        if self.browser_max_mb < 0:
            raise ConfigError("CRAWL_RENDER_BROWSER_MAX_MB must be 0 (no limit) or more")
        if self.browser_max_renders < 0:
            raise ConfigError("CRAWL_RENDER_BROWSER_MAX_RENDERS must be 0 (no limit) or more")

    def browser_path(self) -> str | None:
        """The browser's executable, or None when there is none: a path
        given must exist; a name is looked up on PATH."""
        given = self.browser_setting.strip()
        if not given:
            for name in BROWSER_NAMES:
                found = shutil.which(name)
                if found:
                    return found
            return None
        if os.sep in given:
            return given if os.access(given, os.X_OK) else None
        return shutil.which(given)
