"""The spread duplicate index's round trips: calls (a script, or a plain
command) sent in one pipeline (crawlproject/round_trips.py, shared with the
index of stored payloads: what is sent again when a cluster changes, and what
fails instead), and this package's scripts (:func:`load_script`).

A call that may have run is sent again only if doing so cannot apply it
twice (:attr:`Call.resend`): an exact check sent twice would find its own
digest and judge the page a copy of itself. Whatever fails leaves as a
RedisError, so the callers that keep a page when Redis fails keep it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from crawlproject.lua import Prelude
from crawlproject.lua import load_script as lua_script
from crawlproject.redis_calls import register_script
from crawlproject.round_trips import Call, MayHaveRun
from crawlproject.round_trips import send_calls as _send_calls

__all__ = ["INDEX_PRELUDE", "Call", "MayHaveRun", "load_script", "send_calls"]

# The helpers of this package's scripts, each written once (lua/_prelude.lua:
# the Hamming distance, a bucket's split): prepended to each, the parts it uses.
INDEX_PRELUDE: Prelude = ("crawlproject.dedupe", "_prelude")


def load_script(redis: Redis, name: str) -> AsyncScript:
    """``lua/<name>.lua`` of this package, after what it uses of _prelude.lua."""
    return register_script(redis, lua_script("crawlproject.dedupe", name, INDEX_PRELUDE))


async def send_calls(redis: Redis, calls: Sequence[Call], raise_errors: bool = True) -> list[Any]:
    """crawlproject/round_trips.py's :func:`~crawlproject.round_trips.send_calls`,
    its warnings saying "Duplicate index"."""
    return await _send_calls(redis, calls, raise_errors, what="Duplicate index")
