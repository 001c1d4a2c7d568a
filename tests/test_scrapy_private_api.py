"""The private Scrapy names the frontier relies on, checked against the
installed Scrapy so that an upgrade that changes them fails here, by name,
instead of silently slowing every crawl.

crawlproject/frontier/wake.py reaches the engine's ``_slot.nextcall`` (a
CallLaterOnce) to make the engine poll the scheduler at once: Scrapy has no
public "poll now" call, and without it a delay-bound crawl runs at the
engine's 5 s heartbeat.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any, cast

from scrapy.core import engine
from scrapy.utils.reactor import CallLaterOnce

from crawlproject.frontier.wake import wake_engine


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
