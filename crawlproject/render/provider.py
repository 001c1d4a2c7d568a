"""scrapy-playwright's browser provider, started at the first render.

scrapy-playwright starts Playwright's driver (a Node.js process) when the
engine starts, render or not: about a second of CPU for every worker, most of
which never renders a page. This provider (``PLAYWRIGHT_BROWSER_PROVIDER``,
scrapy-playwright's pluggable provider interface) starts it when the first
browser is launched instead; the browser itself is launched then anyway.
"""

from __future__ import annotations

from playwright.async_api import Browser, BrowserContext
from scrapy_playwright.provider import PlaywrightBrowserProvider


class LazyBrowserProvider(PlaywrightBrowserProvider):
    async def start(self) -> None:
        """Nothing yet: see the module docstring."""

    async def _started(self) -> None:
        if self.browser_type is None:
            await super().start()

    async def launch_browser(self) -> Browser:
        await self._started()
        return await super().launch_browser()

    async def launch_persistent_context(self, context_kwargs: dict) -> BrowserContext:  # type: ignore[type-arg]
        await self._started()
        return await super().launch_persistent_context(context_kwargs)
