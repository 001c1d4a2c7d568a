"""The private Scrapy names the frontier relies on, checked against the
installed Scrapy so that an upgrade that changes them fails here, by name,
instead of silently slowing every crawl.

crawlproject/frontier/wake.py reaches the engine's ``_slot.nextcall`` (a
CallLaterOnce) to make the engine poll the scheduler at once: Scrapy has no
public "poll now" call, and without it a delay-bound crawl runs at the
engine's 5 s heartbeat.

``scrapy.utils._compression._DecompressionMaxSizeExceeded`` is how Scrapy says a
body grew over its limit while being decompressed, and it has no public name:
spiders/sitemaps.py catches it from ``scrapy.utils.gz.gunzip`` (a gzipped sitemap
over the limit is skipped, not a crash), crawlproject/limits.py finds it as the
cause of HttpCompressionMiddleware's IgnoreRequest (``limits/decompressed_too_large``).

crawlproject/frontier/request_ends.py wraps the engine's ``_slot.remove_request``
(and reads ``_slot.inprogress``): the one call Scrapy makes when it is finished
with a request, after its callback or errback, their output and items. Scrapy
has no signal for it, and without it a failure no ack reaches keeps its lease.
"""

from __future__ import annotations

import gzip
import importlib
import inspect
from collections.abc import Collection
from types import SimpleNamespace
from typing import Any, cast

import pytest
from scrapy import Request
from scrapy.core import engine
from scrapy.core.scraper import Scraper
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.utils.asyncio import _parallel_asyncio
from scrapy.utils.gz import gunzip
from scrapy.utils.reactor import CallLaterOnce
from scrapy.utils.test import get_crawler

from crawlproject import limits
from crawlproject.frontier.request_ends import watch_request_ends
from crawlproject.frontier.wake import wake_engine

BOMB = gzip.compress(b"x" * 200_000)  # 200 kB once decompressed, a few hundred bytes sent
LIMIT = 10_000


def test_the_engine_still_keeps_its_poll_call_in_slot_nextcall() -> None:
    source = inspect.getsource(engine.ExecutionEngine)
    assert "self._slot = _Slot(" in source, "ExecutionEngine no longer has _slot: see wake.py"
    assert "self._slot.nextcall.schedule()" in source, "the engine polls another way: wake.py"
    assert "nextcall" in inspect.signature(engine._Slot.__init__).parameters
    assert callable(getattr(CallLaterOnce, "schedule", None))


def test_wake_engine_schedules_the_slot_call_and_tolerates_its_absence() -> None:
    calls: list[str] = []
    nextcall = SimpleNamespace(schedule=lambda: calls.append("poll"))
    crawler = cast(
        Any, SimpleNamespace(engine=SimpleNamespace(_slot=SimpleNamespace(nextcall=nextcall)))
    )
    assert wake_engine(crawler) is True and calls == ["poll"]
    for engine_ in (None, SimpleNamespace(), SimpleNamespace(_slot=None)):
        assert wake_engine(cast(Any, SimpleNamespace(engine=engine_))) is False
    assert calls == ["poll"]


def decompression_error() -> type[Exception]:
    """Scrapy's private size error, or a failure saying who needs it."""
    try:
        module = importlib.import_module("scrapy.utils._compression")
        error = module._DecompressionMaxSizeExceeded
    except (ImportError, AttributeError) as exc:
        pytest.fail(
            f"Scrapy no longer has scrapy.utils._compression._DecompressionMaxSizeExceeded "
            f"({exc!r}): spiders/sitemaps.py (gzipped sitemaps) and crawlproject/limits.py "
            f"(limits/decompressed_too_large) import it; find what Scrapy raises now"
        )
    assert isinstance(error, type) and issubclass(error, Exception)
    return error


def test_gunzip_still_raises_the_private_size_error_the_sitemap_reader_catches() -> None:
    error = decompression_error()
    try:
        gunzip(BOMB, max_size=LIMIT)
    except error:
        pass
    except Exception as exc:  # the point is to name what it raises now
        pytest.fail(
            f"scrapy.utils.gz.gunzip over max_size raises {type(exc).__name__}, not "
            f"{error.__name__}: spiders/sitemaps.py sitemap_body would let it escape"
        )
    else:
        pytest.fail("scrapy.utils.gz.gunzip no longer stops at max_size: spiders/sitemaps.py")


def test_the_compression_middleware_still_raises_ignore_request_from_it() -> None:
    error = decompression_error()
    crawler = get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": LIMIT})
    middleware = HttpCompressionMiddleware.from_crawler(crawler)
    request = Request("http://127.0.0.1/bomb")
    response = Response(
        request.url, body=BOMB, headers={"Content-Encoding": "gzip"}, request=request
    )
    with pytest.raises(IgnoreRequest) as caught:
        middleware.process_response(request, response)
    assert isinstance(caught.value.__cause__, error), (
        f"HttpCompressionMiddleware's IgnoreRequest is no longer raised from "
        f"{error.__name__} (cause: {caught.value.__cause__!r}): crawlproject/limits.py's "
        f"limit_of_failure would stop counting limits/decompressed_too_large"
    )
    assert limits.limit_of_failure(caught.value) == limits.DECOMPRESSED_TOO_LARGE


# crawlproject/frontier/request_ends.py ends every lease on the engine's own
# end of a request: it wraps ``_Slot.remove_request``, which the engine calls
# only after the scraper finished the response or failure (callback or errback,
# its output, its items through the pipelines).


def test_the_engine_removes_a_request_only_after_the_scraper_finished_it() -> None:
    start = inspect.getsource(engine.ExecutionEngine._start_scheduled_request)
    handled = start.find("d.addBoth(self._handle_downloader_output, request)")
    removed = start.find("d.addBoth(partial(self._remove_request, request=request))")
    assert 0 <= handled < removed, (
        "ExecutionEngine._start_scheduled_request no longer removes a request after "
        "handling its download output: crawlproject/frontier/request_ends.py would end "
        "leases too early or never"
    )
    assert "self._slot.remove_request(request)" in inspect.getsource(
        engine.ExecutionEngine._remove_request
    ), "ExecutionEngine._remove_request no longer calls _Slot.remove_request: request_ends.py"
    handle = inspect.getsource(engine.ExecutionEngine._handle_downloader_output)
    assert "yield self.scraper.enqueue_scrape(result, request)" in handle, (
        "the engine no longer waits for the scraper before removing a request: request_ends.py"
    )
    scrape = inspect.getsource(Scraper._scrape)
    assert scrape.count("await self.handle_spider_output_async(output, request, result)") == 2
    assert "await self.start_itemproc_async(output, response=response)" in inspect.getsource(
        Scraper._process_spidermw_output_async
    ), "the scraper no longer waits for the item pipelines: an ack could precede an item"
    assert "await asyncio.wait([fill_task, *work_tasks])" in inspect.getsource(_parallel_asyncio), (
        "the scraper no longer waits for every output of a callback: request_ends.py"
    )


async def test_request_ends_wraps_the_real_slot_and_sees_what_it_still_holds() -> None:
    slot = engine._Slot(True, CallLaterOnce(lambda: None), cast(Any, SimpleNamespace()))
    ended: list[tuple[str, list[str]]] = []

    def note(request: Request, held: Collection[Request]) -> None:
        ended.append((request.url, sorted(r.url for r in held)))

    assert watch_request_ends(SimpleNamespace(_slot=slot), note)
    first, second = Request("http://a.test/1"), Request("http://a.test/2")
    slot.add_request(first)
    slot.add_request(second)
    slot.remove_request(first)
    slot.remove_request(second)
    assert ended == [
        ("http://a.test/1", ["http://a.test/1", "http://a.test/2"]),
        ("http://a.test/2", ["http://a.test/2"]),
    ]
    assert slot.inprogress == set()

    def broken(request: Request, held: Collection[Request]) -> None:
        raise RuntimeError("a bug in the hook")

    assert watch_request_ends(SimpleNamespace(_slot=slot), broken)
    slot.add_request(first)
    slot.remove_request(first)  # the engine's own bookkeeping still happens
    assert slot.inprogress == set()
    for engine_ in (None, SimpleNamespace(), SimpleNamespace(_slot=None)):
        assert watch_request_ends(engine_, note) is False
