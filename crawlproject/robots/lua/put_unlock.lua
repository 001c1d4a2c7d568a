-- put_unlock(record key, lock key; expire_at_ms, owner, field1, value1, ...)
-- Stores a robots.txt record (every field replaced) with its expiry, then
-- releases the fetch lock if this worker still holds it (an expired lock may
-- be another worker's now), in one atomic step.
-- KEYS[1] r:<origin>, KEYS[2] rl:<origin> (one shard: one Cluster slot).
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
return 1
