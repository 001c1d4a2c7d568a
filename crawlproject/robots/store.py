"""robots.txt records in Redis, shared by the fleet (keys ``r:`` and ``rl:`` in
:mod:`crawlproject.frontier.store.keys`). Cluster-safe: a script touches an origin's
record and its lock, which share their shard's hash tag (one slot).

A worker that has no fresh copy makes two calls per fetch: ``get_or_lock``
(the record, and the fleet's fetch lock if it is stale) and, once fetched,
``put_and_unlock`` (robots/lua/), each run once per call id (lua.py
once_per_call: sent again by redis-py's cluster client, get_or_lock answers
its first run's "locked by you", never "locked by another")."""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.lua import CALL_IDS, load_script, once_per_call
from crawlproject.redis_calls import call_reply_ms
from crawlproject.robots.policy import RobotsKind, RobotsRecord

# Delete the lock only if we still hold it: an expired lock may be someone else's now.
_UNLOCK_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
# Records without a body to fall back on need not outlive their expiry by much.
PLAIN_RECORD_GRACE_MS = 3_600_000


class RobotsStore:
    def __init__(self, redis: Redis, keys: CrawlKeys, outage_ms: int) -> None:
        self.redis = redis
        self.keys = keys
        self.outage_ms = outage_ms
        self._unlock = redis.register_script(_UNLOCK_LUA)
        self._renew = redis.register_script(_RENEW_LUA)
        reply_ms = call_reply_ms(redis)
        self._get_or_lock, self._put_unlock = (
            redis.register_script(once_per_call(load_script("crawlproject.robots", name), reply_ms))
            for name in ("get_or_lock", "put_unlock")
        )

    async def get_or_lock(
        self, shard: int, origin: str, now_ms: int, owner: str, ttl_ms: int
    ) -> tuple[RobotsRecord | None, bool]:
        """The stored record, and whether this call took the fetch lock: only
        when the record is missing or stale (expired at ``now_ms``) and no other
        worker holds the lock. One round trip (robots/lua/get_or_lock.lua)."""
        reply = await self._get_or_lock(
            keys=self._script_keys(shard, origin), args=[now_ms, owner, ttl_ms]
        )
        fields = dict(zip(reply[1::2], reply[2::2], strict=True))
        return RobotsRecord.from_fields(cast(dict[bytes, bytes], fields)), bool(int(reply[0]))

    async def put_and_unlock(
        self, shard: int, origin: str, record: RobotsRecord, owner: str
    ) -> None:
        """``put`` and ``unlock`` in one round trip (robots/lua/put_unlock.lua)."""
        args: list[bytes | int | str] = [self._expire_at(record), owner]
        for name, value in record.to_fields().items():
            args += [name, value]
        await self._put_unlock(keys=self._script_keys(shard, origin), args=args)

    def _script_keys(self, shard: int, origin: str) -> list[str]:
        # And the shard's slotguard (never written, keys.py): while the slot
        # migrates the script is refused before it runs, never stopped after
        # put_unlock's DEL at a key that has moved.
        # Last, the call's key (once_per_call), on the shard's tag.
        return [
            self.keys.robots(shard, origin),
            self.keys.robots_lock(shard, origin),
            self.keys.script_keys(shard)[1],
            self.keys.call_reply(shard, CALL_IDS.new()),
        ]

    def _expire_at(self, record: RobotsRecord) -> int:
        # The last good copy must survive an outage as long as the outage window.
        keeps_copy = record.kind is RobotsKind.OK or record.good_body is not None
        return record.expires_ms + (self.outage_ms if keeps_copy else PLAIN_RECORD_GRACE_MS)

    async def get(self, shard: int, origin: str) -> RobotsRecord | None:
        fields = await self.redis.hgetall(self.keys.robots(shard, origin))
        return RobotsRecord.from_fields(cast(dict[bytes, bytes], fields))  # decode_responses off

    async def put(self, shard: int, origin: str, record: RobotsRecord) -> None:
        key = self.keys.robots(shard, origin)
        expire_at = self._expire_at(record)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.hset(key, mapping=record.to_fields())  # type: ignore[arg-type]
            pipe.pexpireat(key, expire_at)
            await pipe.execute()

    async def try_lock(self, shard: int, origin: str, owner: str, ttl_ms: int) -> bool:
        key = self.keys.robots_lock(shard, origin)
        return bool(await self.redis.set(key, owner, nx=True, px=ttl_ms))

    async def unlock(self, shard: int, origin: str, owner: str) -> None:
        await self._unlock(keys=[self.keys.robots_lock(shard, origin)], args=[owner])

    async def renew_lock(self, shard: int, origin: str, owner: str, ttl_ms: int) -> bool:
        key = self.keys.robots_lock(shard, origin)
        return bool(await self._renew(keys=[key], args=[owner, ttl_ms]))
