"""The download handler of http(s): every page fetched by the crawler's own
client, then rendered in a browser only where needed (docs/rendering.md).

1. The page is fetched as always (Scrapy's HTTP/1.1 handler, the caching
   resolver and its address guard).
2. Rendered or not: ``CRAWL_RENDER`` ``never``: no; ``always``, or the request
   asks (``meta["render"]``, scrapy-playwright's ``meta["playwright"]``): yes;
   ``auto``: an HTML page with a script, as the fleet learned for its host and
   template (crawlproject/render/learning.py).
3. A render drives scrapy-playwright's download handler through its public
   meta keys: its document is the answer of step 1 (never fetched twice), every
   other request of the page goes through the gate and the crawler's client
   (crawlproject/render/session.py), the page methods of the request (stored as
   data, crawlproject/render/page_methods.py) run after the page is quiet.
   At most ``CRAWL_RENDER_CONCURRENCY`` pages at once; the DOM is compared with
   the raw document and what was learned written to Redis.

A worker without a browser gives a page that must be rendered back to the
frontier before fetching it, for a worker with one (crawlproject/render/fleet.py);
a worker with one is in the fleet's registry of renderers, and restarts its
browser when it grows (crawlproject/render/recycle.py).

All of it happens inside the download: the request's end, where the frontier
releases its host's politeness slot and starts the host's delay, is the
render's last request. The spider gets the DOM; the archive the raw document
(crawlproject/render/archive.py) and every subresource fetched
(``render_resource_received``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from weakref import WeakKeyDictionary

from redis.exceptions import RedisError
from scrapy import Request, signals
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import Crawler
from scrapy.http import HtmlResponse, Response
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler
from scrapy_playwright.page import PageMethod

from crawlproject.frontier.basics.outcomes import NotFetched, Requeue
from crawlproject.frontier.crawl.crawl_redis import CrawlRedis
from crawlproject.frontier.scrapy_glue.frontier_lookup import (
    crawl_redis_of,
    frontier_closing,
    is_frontier,
)
from crawlproject.guard.policy import GuardPolicy
from crawlproject.render.archive import RENDERED_FLAG, keep_raw
from crawlproject.render.compare import PageContent, difference, has_script
from crawlproject.render.config import RenderConfig
from crawlproject.render.fleet import HAND_BACK_HOLD_SECONDS, HandBacks, Heartbeat, Renderers
from crawlproject.render.gate import BrowserGate, RobotsCheck
from crawlproject.render.learning import RenderLearning, Verdict, Why
from crawlproject.render.page_methods import LIVE_META_KEYS, from_data
from crawlproject.render.recycle import BrowserRecycler
from crawlproject.render.session import RenderSession, decoded_body
from crawlproject.render.templates import host_of, page_template
from crawlproject.store.signals import render_resource_received

logger = logging.getLogger(__name__)

LAUNCH_ALLOWANCE_SECONDS = 60.0  # Chromium starting on a loaded machine: seconds
LEARNING_KEY = "render"  # cp:{C}:render (crawlproject/render/learning.py)
RENDERERS_KEY = "renderers"  # cp:{C}:renderers (crawlproject/render/fleet.py)
_HANDLERS: WeakKeyDictionary[Crawler, RenderDownloadHandler] = WeakKeyDictionary()


class RenderDownloadHandler:
    lazy = False

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.config = RenderConfig.from_settings(crawler.settings)
        self.guard = GuardPolicy.from_settings(crawler.settings)
        self.user_agent = str(crawler.settings.get("USER_AGENT") or "")
        self.http = HTTP11DownloadHandler(crawler)
        self.max_bytes = crawler.settings.getint("DOWNLOAD_MAXSIZE") or 2**31
        self.browser_path = None if self.config.mode == "never" else self.config.browser_path()
        self.playwright: ScrapyPlaywrightDownloadHandler | None = None
        self.pool = asyncio.Semaphore(self.config.concurrency)
        self.recycler: BrowserRecycler | None = None
        if self.browser_path is not None:
            self.playwright = ScrapyPlaywrightDownloadHandler.from_crawler(crawler)
            if crawler.settings.getbool("PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER", True):
                self.recycler = BrowserRecycler(
                    self.playwright, self.pool, self.config.concurrency,
                    self.config.browser_max_mb, self.config.browser_max_renders, self.stats,
                )  # fmt: skip
            crawler.signals.connect(self._opened, signal=signals.spider_opened)
            crawler.signals.connect(self._closing, signal=frontier_closing)
        self.hand_backs = HandBacks(self.config.max_handbacks)
        self._renderers: Renderers | None = None
        self._heartbeat: Heartbeat | None = None
        self._said_unrendered: set[str] = set()
        self._said_handed_back = False
        self._learning: RenderLearning | None = None
        self._robots: RobotsCheck | None = None
        self._closed = False
        self._said_redis_error = False
        self._seconds = 0.0
        self._say_mode()

    @classmethod
    def of(cls, crawler: Crawler) -> RenderDownloadHandler | None:
        """The crawler's handler, if its http(s) downloads go through one."""
        return _HANDLERS.get(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderDownloadHandler:
        # One for http and https: one browser, one page pool per worker.
        handler = _HANDLERS.get(crawler)
        if handler is None:
            handler = _HANDLERS[crawler] = cls(crawler)
        return handler

    def _say_mode(self) -> None:
        c = self.config
        if c.mode == "never":
            logger.info("Rendering: never (CRAWL_RENDER)")
        elif self.browser_path is None:
            given = c.browser_setting.strip()
            logger.warning(
                "Rendering: no browser %s: nothing is rendered (CRAWL_RENDER=%s). Install "
                "Chromium (Debian: apt-get install chromium) or set CRAWL_BROWSER_PATH",
                f"at CRAWL_BROWSER_PATH={given!r}" if given else "on PATH (chromium, "
                "chromium-browser, google-chrome)", c.mode,
            )  # fmt: skip
        else:
            logger.info(
                "Rendering: %s, with %s (%d pages at once, %.0f s each at most)",
                c.mode, self.browser_path, c.concurrency, c.timeout_seconds,
            )  # fmt: skip

    def _opened(self, spider: object) -> None:
        """A worker with a browser says so to the fleet while its frontier is open."""
        renderers = self.renderers()
        shared = crawl_redis_of(self.crawler) if renderers is not None else None
        if renderers is not None and shared is not None:
            self._heartbeat = Heartbeat(renderers, shared.worker_id)
            self._heartbeat.start()

    async def _closing(self) -> None:
        if self._heartbeat is not None:
            await self._heartbeat.stop()

    async def close(self) -> None:
        if self._closed:  # called once per scheme
            return
        self._closed = True
        await self.http.close()
        if self.recycler is not None:
            await self.recycler.wait()
        if self.playwright is not None:
            await self.playwright.close()  # the browser and Playwright's driver with it

    # -- the download ----------------------------------------------------------------

    async def download_request(self, request: Request) -> Response:
        raw = await self.http.download_request(request)
        asked = bool(request.meta.get("render") or request.meta.get("playwright"))
        if not asked and self.config.mode == "never":
            return raw
        if raw.status != 200 or not isinstance(raw, HtmlResponse):
            return raw  # only a page's HTML is rendered
        if self.config.mode == "never" or self.playwright is None:
            if asked or (self.config.mode != "never" and has_script(raw.body)):
                self._skipped(Why.NEVER if self.config.mode == "never" else Why.NO_BROWSER)
            return raw
        document = decoded_body(raw, self.max_bytes)
        if document is None:  # br, zstd, corrupt, or over DOWNLOAD_MAXSIZE decoded
            self._skipped(Why.ENCODING)
            return raw
        verdict, content = await self._decide(request, raw, document, asked)
        if not verdict.render:
            self._skipped(verdict.why)
            return raw
        rendered = await self._render(request, raw, document)
        if rendered is None:
            return raw
        if content is not None:
            await self._learn(raw.url, verdict, content, rendered)
        return rendered

    async def hand_back(self, request: Request) -> None:
        """Before the fetch (middlewares/render_hand_back.py), on a worker
        without a browser: a page that must be rendered goes back to the
        frontier (NotFetched), unfetched, while a worker with one is alive;
        else it is fetched raw (``render/unrendered``). crawlproject/render/fleet.py."""
        if self.playwright is not None or self.config.mode == "never":
            return
        renderers = self.renderers()
        if renderers is None:
            return  # no frontier: no fleet to hand it to
        asked = bool(request.meta.get("render") or request.meta.get("playwright"))
        try:
            alive = await renderers.alive()
            must = asked
            if alive and not must and (learning := self.learning()) is not None:
                must = await learning.must_render(host_of(request.url), page_template(request.url))
        except RedisError as exc:  # fetched raw; the crawl goes on
            self._redis_error(exc)
            return
        if not must:
            return
        if alive and self.hand_backs.may_hand_back(request.url):
            self.stats.inc_value("render/handed_back")
            if not self._said_handed_back:
                self._said_handed_back = True
                logger.info(
                    "Rendering: no browser here; pages that must be rendered go back to "
                    "the frontier for a worker with one (render/handed_back)"
                )
            raise NotFetched(
                f"{request.url} must be rendered: handed back for a worker with a browser",
                requeue=Requeue(hold_seconds=HAND_BACK_HOLD_SECONDS),
            )
        self.hand_backs.fetched(request.url)
        self.stats.inc_value("render/unrendered")
        why = (
            f"handed back {self.config.max_handbacks} times (CRAWL_RENDER_MAX_HANDBACKS)"
            if alive
            else "no worker with a browser in the fleet"
        )
        if why not in self._said_unrendered:
            self._said_unrendered.add(why)
            logger.warning("Rendering: %s must be rendered but is fetched raw: %s "
                           "(render/unrendered counts such pages)", request.url, why)  # fmt: skip

    def _skipped(self, why: Why) -> None:
        self.stats.inc_value("render/skipped")
        self.stats.inc_value(f"render/why/{why.value}")

    async def _decide(
        self, request: Request, raw: Response, document: bytes, asked: bool
    ) -> tuple[Verdict, PageContent | None]:
        if asked or self.config.mode == "always":
            return Verdict(Why.FORCED, None), None
        if not has_script(document):
            return Verdict(Why.NO_SCRIPT, None), None
        learning = self.learning()
        if learning is None:  # no frontier, no fleet to learn with: shells only
            shell = PageContent.of(document, raw.url)
            return Verdict(Why.LEARN if shell.is_shell else Why.STATIC, None), shell
        parsed: list[PageContent] = []

        def content() -> PageContent:  # parsed only where the decision needs it
            if not parsed:
                parsed.append(PageContent.of(document, raw.url))
            return parsed[0]

        try:
            verdict = await learning.decide(host_of(raw.url), page_template(raw.url), content)
        except RedisError as exc:  # the page stands as fetched; the crawl goes on
            self._redis_error(exc)
            return Verdict(Why.REDIS_ERROR, None), None
        return verdict, content() if verdict.render else None

    def _redis_error(self, exc: RedisError) -> None:
        self.stats.inc_value("render/redis_error")
        if not self._said_redis_error:
            self._said_redis_error = True
            logger.warning("Rendering: Redis error (%s): pages are kept as fetched "
                           "meanwhile (render/redis_error counts them)", exc)  # fmt: skip

    async def _learn(
        self, url: str, verdict: Verdict, raw: PageContent, rendered: Response
    ) -> None:
        diff = difference(raw, PageContent.of(rendered.body, url))
        self.stats.inc_value(f"render/learned/{'js' if diff.matters else 'static'}")
        learning = self.learning()
        if learning is not None:
            try:
                await learning.learn(host_of(url), page_template(url), verdict.prior, diff)
            except RedisError as exc:
                self._redis_error(exc)

    def _shared(self) -> CrawlRedis | None:
        """The crawl's Redis, once the frontier schedules this crawl; else None."""
        engine = self.crawler.engine
        if engine is None or not is_frontier(engine.scheduler):
            return None
        return crawl_redis_of(self.crawler)

    def learning(self) -> RenderLearning | None:
        if self._learning is None:
            shared = self._shared()
            if shared is None:
                return None
            key = shared.keys.crawl_prefix + LEARNING_KEY
            self._learning = RenderLearning(shared.redis, key, self.config.sample_every)
        return self._learning

    def renderers(self) -> Renderers | None:
        if self._renderers is None:
            shared = self._shared()
            if shared is None:
                return None
            self._renderers = Renderers(shared.redis, shared.keys.crawl_prefix + RENDERERS_KEY)
        return self._renderers

    def robots(self) -> RobotsCheck | None:
        """The robots middleware's cached rules (middlewares/robotstxt.py), if it runs."""
        if self._robots is None and self.crawler.engine is not None:
            manager = self.crawler.engine.downloader.middleware
            for mw in manager.middlewares:
                allows = getattr(mw, "allows", None)
                if type(mw).__name__ == "RobotsTxtMiddleware" and callable(allows):
                    self._robots = allows
        return self._robots

    # -- the render ------------------------------------------------------------------

    async def _render(self, request: Request, raw: Response, document: bytes) -> Response | None:
        assert self.playwright is not None
        robots = self.robots()
        gate = BrowserGate(raw.url, self.guard, (lambda u: robots(u) is True) if robots else None)
        session = RenderSession(
            raw, document, gate, self.http.download_request, self.user_agent, self.stats,
            self.config.timeout_seconds, self.max_bytes,
        )  # fmt: skip
        meta = {
            k: v for k, v in request.meta.items()
            if k.startswith("playwright_") and k not in LIVE_META_KEYS
        }  # fmt: skip
        meta.update(
            playwright=True,
            playwright_page_init_callback=session.install,
            playwright_page_goto_kwargs={
                "wait_until": "load",
                "timeout": self.config.timeout_seconds * 1000,
            },
            playwright_page_methods=[
                PageMethod(session.wait_quiet),
                *from_data(request.meta.get("playwright_page_methods")),
            ],
        )
        ours = Request(raw.url, meta=meta, dont_filter=True)
        started = time.monotonic()
        async with self.pool:
            try:
                # The time limit runs from the page's opening (session.py); this
                # bound is a safety net that leaves room for a browser's launch.
                page = await asyncio.wait_for(
                    self.playwright.download_request(ours),
                    self.config.timeout_seconds + LAUNCH_ALLOWANCE_SECONDS,
                )
            except Exception as exc:  # whatever the browser raised: the raw page stands
                self.stats.inc_value("render/failed")
                logger.warning("Render of %s failed (%s: %s); its raw HTML is used",
                               raw.url, type(exc).__name__, exc)  # fmt: skip
                return None
            finally:
                # Whole seconds so far, as an integer counter (`crawlproject
                # status` sums integer counters over the fleet).
                self._seconds += time.monotonic() - started
                self.stats.set_value("render/seconds", round(self._seconds))
        if self.recycler is not None:
            self.recycler.rendered()  # its page is back in the pool
        self.stats.inc_value("render/pages")
        for exchange in session.resources:
            await self.crawler.signals.send_catch_log_async(
                signal=render_resource_received, exchange=exchange
            )
        headers = raw.headers.copy()
        for name in (b"Content-Encoding", b"Content-Length"):
            headers.pop(name, None)
        rendered = HtmlResponse(
            url=raw.url, status=raw.status, headers=headers, body=page.body,
            encoding=getattr(page, "encoding", None) or "utf-8", request=request,
            flags=[*raw.flags, RENDERED_FLAG], certificate=raw.certificate,
            ip_address=raw.ip_address, protocol=raw.protocol,
        )  # fmt: skip
        keep_raw(rendered, raw.replace(body=document, headers=headers, request=request))
        return rendered
