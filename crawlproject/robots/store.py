"""robots.txt records in Redis, shared by the fleet (keys ``r:`` and ``rl:`` in
:mod:`crawlproject.frontier.keys`). Single-key commands only: Cluster-safe."""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from crawlproject.frontier.keys import CrawlKeys
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

    async def get(self, shard: int, origin: str) -> RobotsRecord | None:
        fields = await self.redis.hgetall(self.keys.robots(shard, origin))
        return RobotsRecord.from_fields(cast(dict[bytes, bytes], fields))  # decode_responses off

    async def put(self, shard: int, origin: str, record: RobotsRecord) -> None:
        key = self.keys.robots(shard, origin)
        # The last good copy must survive an outage as long as the outage window.
        keeps_copy = record.kind is RobotsKind.OK or record.good_body is not None
        expire_at = record.expires_ms + (self.outage_ms if keeps_copy else PLAIN_RECORD_GRACE_MS)
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
