"""Counters in Redis hashes, each increment applied once (issue 42, item 2).

HINCRBY is a write that must not be sent twice: a reply lost after Redis ran
it leaves the caller unable to tell whether it ran, and redis-py's cluster
client then sends it again by itself (its retry, kept: redis_client.py), as
a caller that retries a failed batch would. So the project adds to a counter
only through :class:`Increments`: one small script per call, run once per
call id (lua.py once_per_call): sent again under its id, it answers its
first run's reply and adds nothing. The counters so kept: the token guard's
evidence (frontier/admission/token_evidence.py) and the fleet's ``stats`` and
``tp`` (status/fleet_counters.py, which sends a failed report again under its
call id). Every key of one call, the call's reply key last, shares one slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from crawlproject.lua import once_per_call
from crawlproject.redis_calls import call_reply_ms, register_script

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

# ARGV in threes: a hash's index in KEYS, a field, an increment.
_HINCRBY = """
for i = 1, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
return 1
"""

Increment = tuple[str, str | bytes, int]  # a hash's key, a field, how much to add


class Increments:
    """Adds to fields of hashes, once per call id."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._script: AsyncScript | None = None  # registered at the first call

    async def add(self, call_key: str, increments: Sequence[Increment]) -> None:
        """Applies ``increments`` once for ``call_key`` (``<tag prefix>c:<call
        id>``: the same key on each send of one call; its slot is that of the
        hashes)."""
        if not increments:
            return
        keys: list[str] = []
        args: list[str | bytes | int] = []
        for key, field, amount in increments:
            if key not in keys:
                keys.append(key)
            args += [keys.index(key) + 1, field, amount]
        if self._script is None:
            text = once_per_call(_HINCRBY, call_reply_ms(self.redis))
            self._script = register_script(self.redis, text)
        await self._script(keys=[*keys, call_key], args=args)
