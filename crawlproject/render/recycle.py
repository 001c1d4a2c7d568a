"""The browser restarted when it grows: its memory (the resident set of the
worker's Chromium processes, read from /proc) past
``CRAWL_RENDER_BROWSER_MAX_MB``, or after ``CRAWL_RENDER_BROWSER_MAX_RENDERS``
renders. Between renders only: the restart takes every page of the pool, so
the renders in flight end first and the next ones wait for it
(``render/browser_restarts``).

The browser is closed; scrapy-playwright's restart of a disconnected browser
(``PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER``, on by default) launches a new
one at the next render, as it does for a browser that died.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import defaultdict

from scrapy.statscollectors import StatsCollector
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler

logger = logging.getLogger(__name__)

# Chromium's processes, by their name (/proc/<pid>/stat): the browser, its
# zygotes, renderers and GPU/utility processes ("chromium", "chrome",
# "chromium-browse"), or Playwright's headless shell.
BROWSER_NAMES = ("chrom", "headless_shell")
DISCONNECT_WAIT_SECONDS = 10.0  # scrapy-playwright forgetting the closed browser


def _stat(pid: str) -> tuple[str, int, int] | None:
    """(name, parent pid, resident pages) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("latin-1")
    except OSError:
        return None
    # The name is in parentheses and may hold spaces or parentheses itself.
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return name, int(fields[1]), int(fields[21])  # ppid (4th field), rss (24th)


def browser_rss_bytes(root: int | None = None) -> int:
    """Resident memory of the Chromium processes below ``root`` (this
    process): shared pages counted in each process, as a limit may."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = defaultdict(list)
    procs: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(entry)
        if stat is None:
            continue
        name, ppid, rss = stat
        children[ppid].append(int(entry))
        procs[int(entry)] = (name, rss)
    total, stack = 0, list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        name, rss = procs[pid]
        if name.startswith(BROWSER_NAMES):
            total += rss
        stack.extend(children.get(pid, ()))
    return total * os.sysconf("SC_PAGE_SIZE")


class BrowserRecycler:
    def __init__(
        self,
        playwright: ScrapyPlaywrightDownloadHandler,
        pool: asyncio.Semaphore,
        pages: int,
        max_mb: int,
        max_renders: int,
        stats: StatsCollector,
    ) -> None:
        self.playwright = playwright
        self.pool = pool
        self.pages = pages
        self.max_mb = max_mb
        self.max_renders = max_renders
        self.stats = stats
        self.renders = 0  # since the browser's launch (or last restart)
        self._task: asyncio.Task[None] | None = None

    def rendered(self) -> None:
        """After a render (its page back in the pool): a restart, if due, in the
        background, so that this page's download ends now."""
        self.renders += 1
        if self._task is not None:
            return  # one on its way
        why = None
        if self.max_renders and self.renders >= self.max_renders:
            why = f"{self.renders} renders"
        elif self.max_mb:
            mb = browser_rss_bytes() / 2**20
            if mb > self.max_mb:
                why = f"{mb:.0f} MB resident, over CRAWL_RENDER_BROWSER_MAX_MB={self.max_mb}"
        if why is not None:
            self._task = asyncio.get_running_loop().create_task(self._restart(why))

    async def wait(self) -> None:
        """The restart on its way, if any, over (the worker closes)."""
        if self._task is not None:
            await self._task

    async def _restart(self, why: str) -> None:
        try:
            for _ in range(self.pages):  # every page: no render in flight
                await self.pool.acquire()
            try:
                await self._close_browser(why)
            finally:
                for _ in range(self.pages):
                    self.pool.release()
        except Exception as exc:  # the next render launches a browser anyway
            logger.warning("Rendering: restarting the browser failed (%s: %s)",
                           type(exc).__name__, exc)  # fmt: skip
        finally:
            self._task = None

    async def _close_browser(self, why: str) -> None:
        browser = getattr(self.playwright, "browser", None)
        if browser is None:
            return  # not launched, or died and forgotten already
        logger.info("Rendering: restarting the browser (%s)", why)
        # Chromium's processes with it; bounded: a wedged browser must not hold
        # the pool (every page of it) for ever.
        await asyncio.wait_for(browser.close(), DISCONNECT_WAIT_SECONDS)
        # scrapy-playwright forgets the browser in its "disconnected" callback,
        # a task of its own: the next render must not find the closed one.
        loop = asyncio.get_running_loop()
        until = loop.time() + DISCONNECT_WAIT_SECONDS
        while getattr(self.playwright, "browser", None) is browser and loop.time() < until:
            await asyncio.sleep(0.01)
        self.renders = 0
        self.stats.inc_value("render/browser_restarts")
