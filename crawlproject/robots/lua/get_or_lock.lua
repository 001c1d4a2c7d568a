-- get_or_lock(record key, lock key; now_ms, owner, ttl_ms)
-- A host's robots.txt record, and the fleet's fetch lock when the record is
-- missing or stale, in one atomic step: the record read is the latest any
-- worker stored, since a record is only ever written under the lock.
-- KEYS[1] r:<origin>, KEYS[2] rl:<origin> (one shard: one Cluster slot).
-- Returns {locked, field1, value1, ...}: locked 1 when this call took the
-- lock (the record, if any, is stale), 0 when the record is fresh (x > now)
-- or another worker holds the lock.
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if fields[i] == 'x' then
    if tonumber(fields[i + 1]) and tonumber(fields[i + 1]) > tonumber(ARGV[1]) then
      table.insert(fields, 1, 0)
      return fields
    end
    break
  end
end
local locked = redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) and 1 or 0
table.insert(fields, 1, locked)
return fields
