"""Wires rendering into Scrapy's settings (a Scrapy add-on, ``ADDONS`` in
crawlproject/settings.py), before the crawler reads them:

* scrapy-playwright's launch options from ``CRAWL_BROWSER_PATH`` (the system's
  Chromium; Playwright's own browser download is not needed), merged under
  any ``PLAYWRIGHT_LAUNCH_OPTIONS`` the user gave, and the page pool's size
  (``PLAYWRIGHT_MAX_PAGES_PER_CONTEXT``) from ``CRAWL_RENDER_CONCURRENCY``;
  Playwright's driver started at the first render (``provider.py``);
* a spider written for scrapy-playwright names its download handler in
  ``DOWNLOAD_HANDLERS``: the crawler's own handler takes its place (it drives
  scrapy-playwright's, with every browser request gated: docs/rendering.md).
"""

from __future__ import annotations

import logging

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from crawlproject.render.config import RenderConfig
from crawlproject.setting_values import ConfigError

logger = logging.getLogger(__name__)

RENDER_HANDLER = "middlewares.render_handler.RenderDownloadHandler"
PLAYWRIGHT_HANDLER = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
# Playwright's driver started at the first render, not at every worker's start.
LAZY_PROVIDER = "crawlproject.render.provider.LazyBrowserProvider"
# No network of the browser's own: every request it makes is the page's,
# routed through the gate (crawlproject/render/gate.py).
CHROMIUM_ARGS = [
    "--disable-background-networking",
    "--dns-prefetch-disable",
    "--no-pings",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
]


class RenderAddon:
    def update_settings(self, settings: BaseSettings) -> None:
        handlers = settings.getdict("DOWNLOAD_HANDLERS")
        taken = [s for s in ("http", "https") if handlers.get(s) == PLAYWRIGHT_HANDLER]
        if taken:
            priority = settings.getpriority("DOWNLOAD_HANDLERS") or 0
            settings.set("DOWNLOAD_HANDLERS", {**handlers, **dict.fromkeys(taken, RENDER_HANDLER)},
                         priority=priority)  # fmt: skip
            logger.info(
                "DOWNLOAD_HANDLERS names scrapy-playwright's handler: the crawler's render "
                "handler drives it instead (its requests through the frontier, every browser "
                "request gated: docs/rendering.md)"
            )
        try:
            config = RenderConfig.from_settings(settings)
        except ConfigError:
            return  # said in one line by the handler, which refuses to start
        path = config.browser_path()
        options = dict(settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS"))
        if path is not None:
            options.setdefault("executable_path", path)
        options.setdefault("headless", True)
        options["args"] = [*CHROMIUM_ARGS, *options.get("args", [])]
        _set(settings, "PLAYWRIGHT_LAUNCH_OPTIONS", options)
        _set(settings, "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT", config.concurrency)
        _set(settings, "PLAYWRIGHT_BROWSER_TYPE", "chromium")
        if not settings.get("PLAYWRIGHT_BROWSER_PROVIDER"):
            _set(settings, "PLAYWRIGHT_BROWSER_PROVIDER", LAZY_PROVIDER)


def _set(settings: BaseSettings, name: str, value: object) -> None:
    """Set at the add-on's priority, or at the user's own where it is higher
    (the merged launch options keep what the user gave)."""
    priority = max(settings.getpriority(name) or 0, SETTINGS_PRIORITIES["addon"])
    settings.set(name, value, priority=priority)
