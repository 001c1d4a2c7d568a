"""One render: the browser page's requests, routed back to the worker.

The page's document is the raw answer the crawler already received
(``route.fulfill``): never fetched twice. Every other request the page makes
passes the gate (crawlproject/render/gate.py); a refused one is aborted and
counted (``render/blocked``, ``render/blocked/<reason>``), an allowed one is
fetched by the worker's own HTTP client (``fetch``: the crawler's resolver
and address guard, its User-Agent) and handed to the browser, and kept for
the archive. The render is done once the page is quiet after its load
event, or at its deadline (``render/timeouts``): :meth:`wait_quiet`, the
first page method.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from urllib.parse import urldefrag, urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Route
from playwright.async_api import Request as BrowserRequest
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from scrapy import Request
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from crawlproject.guard.errors import refusal_of
from crawlproject.render.gate import BrowserGate
from crawlproject.store.warc import HttpExchange, header_lines, http_reason

logger = logging.getLogger(__name__)

Fetch = Callable[[Request], Awaitable[Response]]
# Not handed to the browser: the body it gets is decoded, its length its own.
_DROPPED_RESPONSE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
# Not sent for the browser: the crawler's client sets these itself.
_DROPPED_REQUEST_HEADERS = frozenset({"accept-encoding", "user-agent", "host", "content-length"})


def decoded_body(response: Response, max_bytes: int) -> bytes | None:
    """The body without its Content-Encoding (gzip, deflate, none), at most
    ``max_bytes`` decoded (a gzip bomb stops there); None for another encoding,
    a corrupt body or one over the limit. The handler sees answers before
    HttpCompressionMiddleware."""
    coding = (response.headers.get(b"Content-Encoding") or b"").decode("latin-1").strip().lower()
    if coding in ("", "identity"):
        return response.body
    if coding not in ("gzip", "x-gzip", "deflate"):
        return None
    for wbits in (zlib.MAX_WBITS | 32, -zlib.MAX_WBITS):  # gzip or zlib; raw deflate
        try:
            decoder = zlib.decompressobj(wbits)
            body = decoder.decompress(response.body, max_bytes + 1)
        except zlib.error:
            continue
        return body if len(body) <= max_bytes else None
    return None


def browser_headers(response: Response) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, values in response.headers.items():
        key = name.decode("latin-1")
        if key.lower() in _DROPPED_RESPONSE_HEADERS:
            continue
        sep = "\n" if key.lower() == "set-cookie" else ", "
        headers[key] = sep.join(v.decode("latin-1") for v in values)
    return headers


class RenderSession:
    def __init__(
        self,
        raw: Response,
        document: bytes,
        gate: BrowserGate,
        fetch: Fetch,
        user_agent: str,
        stats: StatsCollector,
        timeout_seconds: float,
        max_bytes: int,
    ) -> None:
        self.raw = raw
        self.document = document
        self.gate = gate
        self.fetch = fetch
        self.user_agent = user_agent
        self.stats = stats
        self.timeout_seconds = timeout_seconds
        self.deadline = time.monotonic() + timeout_seconds
        self._done = False
        self.max_bytes = max_bytes
        self.resources: list[HttpExchange] = []
        self.blocked = 0
        self.in_flight = 0
        self._changed = asyncio.Event()
        self._document_served: set[int] = set()
        self._page_url = urldefrag(raw.url)[0]

    # -- scrapy-playwright's hooks ---------------------------------------------------

    async def install(self, page: Page, request: Request) -> None:
        """``playwright_page_init_callback``: registered after scrapy-playwright's
        own route, so it runs first and every request ends here."""
        logger.debug("Render of %s: page open", self.raw.url)
        # The time limit runs from the page's opening, not from a browser's launch.
        self.deadline = time.monotonic() + self.timeout_seconds
        await page.route("**", self._route)

    async def wait_quiet(self, page: Page) -> None:
        """The first page method: until the page is quiet (Playwright's
        ``networkidle``: no request for 500 ms, as the browser counts them,
        routed ones included) and none of ours is still being fetched, or
        the deadline (``render/timeouts``)."""
        try:
            await page.wait_for_load_state("networkidle", timeout=self._left_ms())
            while self.in_flight and self._left_ms() > 1:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), self._left_ms() / 1000)
        except PlaywrightTimeoutError:
            pass
        if self._left_ms() <= 1:
            self.stats.inc_value("render/timeouts")
        # Over: what the page asks from now on is not fetched (a page that
        # polls for ever would go on while it is read and closed).
        self._done = True
        logger.debug("Render of %s: quiet", self.raw.url)

    def _left_ms(self) -> float:
        return max((self.deadline - time.monotonic()) * 1000, 1.0)

    # -- the page's requests ---------------------------------------------------------

    async def _route(self, route: Route, request: BrowserRequest) -> None:
        try:
            if self._done:
                await route.abort("aborted")
                return
            if request.is_navigation_request() and request.frame.parent_frame is None:
                await self._navigation(route, request)
            else:
                await self._resource(route, request)
        except PlaywrightError as exc:  # the page closed meanwhile (render over)
            logger.debug("Render of %s: %s for %s", self.raw.url, exc, request.url)

    async def _navigation(self, route: Route, request: BrowserRequest) -> None:
        page = id(request.frame.page)
        # Once per browser page: scrapy-playwright renders again on a new page
        # when the browser died under the first (TargetClosedError).
        if page not in self._document_served and urldefrag(request.url)[0] == self._page_url:
            logger.debug("Render of %s: document", self.raw.url)
            self._document_served.add(page)
            await route.fulfill(
                status=self.raw.status, headers=browser_headers(self.raw), body=self.document
            )
            return
        self._block("navigation")  # a script taking the page elsewhere
        await route.abort("blockedbyclient")

    def _block(self, reason: str) -> None:
        self.blocked += 1
        self.stats.inc_value("render/blocked")
        self.stats.inc_value(f"render/blocked/{reason}")

    async def _resource(self, route: Route, request: BrowserRequest) -> None:
        reason = self.gate.refusal(request.url)
        if reason is not None:
            self._block(reason)
            await route.abort("blockedbyclient")
            return
        self.in_flight += 1
        self._touch()
        try:
            response = await self._fetch(request)
        finally:
            self.in_flight -= 1
            self._touch()
        if response is None:
            await route.abort("failed")
            return
        status, headers, body = response
        await route.fulfill(status=status, headers=headers, body=body)

    def _touch(self) -> None:
        self._changed.set()

    async def _fetch(self, request: BrowserRequest) -> tuple[int, dict[str, str], bytes] | None:
        headers = {
            k: v for k, v in (await request.all_headers()).items()
            if k.lower() not in _DROPPED_REQUEST_HEADERS and not k.startswith(":")
        }  # fmt: skip
        headers["User-Agent"] = self.user_agent
        timeout = max(self.deadline - time.monotonic(), 0.5)
        ours = Request(
            request.url,
            method=request.method,
            headers=headers,
            body=request.post_data_buffer or b"",
            meta={"download_timeout": timeout},
            dont_filter=True,
        )
        try:
            response = await self.fetch(ours)
        except Exception as exc:  # whatever the client raised: the resource failed
            self.stats.inc_value("render/resource_failed")
            if refusal_of(exc, urlsplit(request.url).hostname) is not None:
                self._block("guard")  # a name the guard refused once resolved
            logger.debug("Render of %s: %s failed (%s)", self.raw.url, request.url, exc)
            return None
        body = decoded_body(response, self.max_bytes)
        if body is None:
            self.stats.inc_value("render/resource_failed")
            return None
        self.stats.inc_value("render/resources")
        logger.debug("Render of %s: %s fetched", self.raw.url, request.url)
        self.resources.append(
            HttpExchange(
                url=request.url,
                method=request.method,
                request_headers=header_lines(ours.headers),
                request_body=ours.body,
                status=response.status,
                reason=http_reason(response.status),
                response_headers=header_lines(response.headers),
                body=body,
                fetched_at=datetime.now(UTC),
                ip_address=str(response.ip_address) if response.ip_address else None,
            )
        )
        return response.status, browser_headers(response), body
