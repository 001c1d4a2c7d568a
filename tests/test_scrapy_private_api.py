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
"""

from __future__ import annotations

import gzip
import importlib
import inspect
from types import SimpleNamespace
from typing import Any, cast

import pytest
from scrapy import Request
from scrapy.core import engine
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.utils.gz import gunzip
from scrapy.utils.reactor import CallLaterOnce
from scrapy.utils.test import get_crawler

from crawlproject import limits
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
