"""The private Scrapy names the frontier relies on, checked against the
installed Scrapy so that an upgrade that changes them fails here, by name,
instead of silently slowing every crawl.

crawlproject/frontier/scrapy_glue/engine_hooks.py, the one module that touches Scrapy's
engine, reaches the engine's ``_slot.nextcall`` (a CallLaterOnce) to make the
engine poll the scheduler at once: Scrapy has no public "poll now" call, and
without it a delay-bound crawl runs at the engine's 5 s heartbeat.

``scrapy.utils._compression._DecompressionMaxSizeExceeded`` is how Scrapy says a
body grew over its limit while being decompressed, and it has no public name:
spiders/sitemaps.py catches it from ``scrapy.utils.gz.gunzip`` (a gzipped sitemap
over the limit is skipped, not a crash), crawlproject/limits.py finds it as the
cause of HttpCompressionMiddleware's IgnoreRequest (``limits/decompressed_too_large``).

The same module wraps the engine's ``_slot.remove_request`` (and reads
``_slot.inprogress``): the one call Scrapy makes when it is finished with a
request, after its callback or errback, their output and items. Scrapy has no
signal for it, and without it a failure no ack reaches keeps its lease. The
module checks both hooks when the frontier opens (refused in one line
otherwise), and a hook failing at run time stops the worker in one line;
tests/test_scrapy_versions.py runs them in real crawls on every Scrapy the
requirements allow.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib
import inspect
import logging
import re
from collections.abc import Collection
from types import SimpleNamespace
from typing import Any, cast

import pytest
import scrapy
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
from crawlproject.frontier.basics.outcomes import FRONTIER_ERROR
from crawlproject.frontier.scrapy_glue.engine_hooks import (
    EngineMisfit,
    check_engine,
    wake_engine,
    watch_request_ends,
)
from testkit import REPO_ROOT

# The engine's private names: its slot and what hangs on it.
ENGINE_PRIVATE = re.compile(r"""\b_slot\b|\b_Slot\b|nextcall|inprogress|remove_request""")
BOMB = gzip.compress(b"x" * 200_000)  # 200 kB once decompressed, a few hundred bytes sent
LIMIT = 10_000


def test_only_engine_hooks_touches_the_engines_private_names() -> None:
    hooks = REPO_ROOT / "crawlproject" / "frontier" / "scrapy_glue" / "engine_hooks.py"
    found = [
        f"{path.relative_to(REPO_ROOT)}:{n}: {line.strip()}"
        for folder in ("crawlproject", "spiders", "middlewares", "pipelines")
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if path != hooks
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if ENGINE_PRIVATE.search(line)
    ]
    assert found == [], "Scrapy's engine internals belong in engine_hooks.py:\n" + "\n".join(found)


def test_the_engine_still_keeps_its_poll_call_in_slot_nextcall() -> None:
    source = inspect.getsource(engine.ExecutionEngine)
    assert "self._slot = _Slot(" in source, (
        "ExecutionEngine no longer has _slot: see engine_hooks.py"
    )
    assert "self._slot.nextcall.schedule()" in source, (
        "the engine polls another way: engine_hooks.py"
    )
    assert "nextcall" in inspect.signature(engine._Slot.__init__).parameters
    assert callable(getattr(CallLaterOnce, "schedule", None))


class Engine:
    """A stand-in for Scrapy's engine: its slot, and the close reasons asked for."""

    def __init__(self, slot: object) -> None:
        self._slot = slot
        self.closed: list[str] = []

    async def close_spider_async(self, *, reason: str = "cancelled") -> None:
        self.closed.append(reason)


# The outage bound the scheduler read once (CRAWL_REDIS_OUTAGE_SECONDS), given
# to the hooks: they read no setting (a crawler without settings here).
BOUND = 60.0


def crawler_of(engine_: object) -> Any:
    return SimpleNamespace(engine=engine_)


async def until_closed(engine_: Engine) -> list[str]:
    for _ in range(100):  # the close runs as a task of its own: a few loop turns
        if engine_.closed:
            break
        await asyncio.sleep(0)
    return engine_.closed


def stop_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_wake_engine_schedules_the_slot_call_and_is_quiet_without_a_spider() -> None:
    calls: list[str] = []
    nextcall = SimpleNamespace(schedule=lambda: calls.append("poll"))
    assert wake_engine(crawler_of(Engine(SimpleNamespace(nextcall=nextcall))), BOUND) is True
    assert calls == ["poll"]
    for engine_ in (None, SimpleNamespace(), Engine(None)):  # before the open, after the close
        assert wake_engine(crawler_of(engine_), BOUND) is False
    assert calls == ["poll"]


async def test_a_wake_that_fails_stops_the_worker_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine_ = Engine(SimpleNamespace(nextcall=None))  # a slot of another shape
    crawler = crawler_of(engine_)
    assert wake_engine(crawler, BOUND) is False
    assert wake_engine(crawler, BOUND) is False  # said once
    assert await until_closed(engine_) == [FRONTIER_ERROR]
    (line,) = stop_lines(caplog)
    assert line.startswith(
        "Stopping the worker (frontier_error): waking Scrapy's engine "
        "(engine._slot.nextcall.schedule) failed (AttributeError: "
    ), line


@pytest.mark.parametrize(
    ("slot", "lacking"),
    [
        (None, "engine._slot"),
        (SimpleNamespace(inprogress=set()), "engine._slot.remove_request"),
        (SimpleNamespace(remove_request=print, inprogress=[]), "engine._slot.inprogress (a set)"),
        (
            SimpleNamespace(remove_request=print, inprogress=set(), nextcall=object()),
            "engine._slot.nextcall.schedule",
        ),
    ],
)
def test_an_engine_without_a_hook_is_refused_in_one_line(slot: object, lacking: str) -> None:
    with pytest.raises(EngineMisfit) as refused:
        check_engine(crawler_of(Engine(slot)))
    assert str(refused.value) == (
        f"this Scrapy ({scrapy.__version__}) lacks {lacking}: "
        "crawlproject supports Scrapy 2.19.x (requirements.txt)"
    )
    with pytest.raises(EngineMisfit):
        watch_request_ends(crawler_of(Engine(slot)), lambda request, held: None, BOUND)


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


# crawlproject/frontier/scrapy_glue/engine_hooks.py ends every lease on the engine's own
# end of a request: it wraps ``_Slot.remove_request``, which the engine calls
# only after the scraper finished the response or failure (callback or errback,
# its output, its items through the pipelines).


def test_the_engine_removes_a_request_only_after_the_scraper_finished_it() -> None:
    start = inspect.getsource(engine.ExecutionEngine._start_scheduled_request)
    handled = start.find("d.addBoth(self._handle_downloader_output, request)")
    removed = start.find("d.addBoth(partial(self._remove_request, request=request))")
    assert 0 <= handled < removed, (
        "ExecutionEngine._start_scheduled_request no longer removes a request after "
        "handling its download output: crawlproject/frontier/scrapy_glue/engine_hooks.py would end "
        "leases too early or never"
    )
    assert "self._slot.remove_request(request)" in inspect.getsource(
        engine.ExecutionEngine._remove_request
    ), "ExecutionEngine._remove_request no longer calls _Slot.remove_request: engine_hooks.py"
    handle = inspect.getsource(engine.ExecutionEngine._handle_downloader_output)
    assert "yield self.scraper.enqueue_scrape(result, request)" in handle, (
        "the engine no longer waits for the scraper before removing a request: engine_hooks.py"
    )
    scrape = inspect.getsource(Scraper._scrape)
    assert scrape.count("await self.handle_spider_output_async(output, request, result)") == 2
    assert "await self.start_itemproc_async(output, response=response)" in inspect.getsource(
        Scraper._process_spidermw_output_async
    ), "the scraper no longer waits for the item pipelines: an ack could precede an item"
    assert "await asyncio.wait([fill_task, *work_tasks])" in inspect.getsource(_parallel_asyncio), (
        "the scraper no longer waits for every output of a callback: engine_hooks.py"
    )


async def test_request_ends_wraps_the_real_slot_and_sees_what_it_still_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slot = engine._Slot(True, CallLaterOnce(lambda: None), cast(Any, SimpleNamespace()))
    check_engine(crawler_of(Engine(slot)))  # the real slot fits
    ended: list[tuple[str, list[str]]] = []

    def note(request: Request, held: Collection[Request]) -> None:
        ended.append((request.url, sorted(r.url for r in held)))

    watch_request_ends(crawler_of(Engine(slot)), note, BOUND)
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
    assert stop_lines(caplog) == []


async def test_a_request_end_that_fails_stops_the_worker_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slot = engine._Slot(True, CallLaterOnce(lambda: None), cast(Any, SimpleNamespace()))
    engine_ = Engine(slot)

    def broken(request: Request, held: Collection[Request]) -> None:
        raise RuntimeError("a bug in the hook")

    watch_request_ends(crawler_of(engine_), broken, BOUND)
    first, second = Request("http://a.test/1"), Request("http://a.test/2")
    slot.add_request(first)
    slot.add_request(second)
    slot.remove_request(first)  # the engine's own bookkeeping still happens
    slot.remove_request(second)
    assert slot.inprogress == set()
    # Never only logged: the worker stops, and its leases go back on the close.
    assert await until_closed(engine_) == [FRONTIER_ERROR]
    assert stop_lines(caplog) == [
        "Stopping the worker (frontier_error): ending the lease of http://a.test/1 failed "
        "(RuntimeError: a bug in the hook); its leases go back to the frontier. Run with "
        f"LOG_LEVEL=DEBUG for the traceback, and report it (Scrapy {scrapy.__version__})"
    ]
