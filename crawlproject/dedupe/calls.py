"""The spread duplicate index's round trips: calls (a script, or a plain
command) sent in one pipeline. On one server one pipeline; on a Redis Cluster
redis-py's cluster pipeline sends each node its calls at once (EVALSHA sent
as a raw command: its named method is refused in a cluster pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError


def load_script(redis: Redis, name: str) -> AsyncScript:
    text = (resources.files("crawlproject.dedupe") / "lua" / f"{name}.lua").read_text()
    return redis.register_script(text)


@dataclass
class Call:
    """One command of a round trip: a script (EVALSHA) or a plain command."""

    script: AsyncScript | None
    keys: list[str]
    args: list[Any]
    command: str = ""  # a plain command (script None): HSETNX, HGET


async def send_calls(redis: Redis, calls: Sequence[Call]) -> list[Any]:
    """The calls in one pipeline, replies in order. On NOSCRIPT (a restarted,
    flushed or newly promoted server) that call did not run: the script is
    loaded and the refused calls sent again."""
    replies: list[Any] = [None] * len(calls)
    todo = list(range(len(calls)))
    for attempt in (1, 2):
        pipe = redis.pipeline(transaction=False)
        for i in todo:
            call = calls[i]
            if call.script is None:
                pipe.execute_command(call.command, *call.keys, *call.args)
            else:
                pipe.execute_command(
                    "EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args
                )
        got = await pipe.execute(raise_on_error=False)
        refused = []
        for i, reply in zip(todo, got, strict=True):
            replies[i] = reply
            if isinstance(reply, NoScriptError) and attempt == 1:
                refused.append(i)
        if not refused:
            break
        for script in {id(calls[i].script): calls[i].script for i in refused}.values():
            assert script is not None
            await redis.script_load(script.script)
        todo = refused
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies
