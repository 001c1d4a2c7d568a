-- park_host(P, host, max_n, reason)
-- Sets a host aside (a trap: e.g. a run of duplicate pages, or a host that
-- does not resolve): up to max_n of its queued URLs move to the shard's
-- `parked` list, as "host \t band \t item" (see the prelude), kept for an
-- operator to inspect or requeue, and the host is flagged so that URLs added
-- later go there too (add.lua). The host leaves `ready` and due once its queue
-- is empty. Returns the number parked (call again while it is max_n).
local host = ARGV[2]
local max_n = tonumber(ARGV[3])
local reason = ARGV[4] or 'parked'
local hk = P .. 'h:' .. host
redis.call('HSET', hk, 'parked', reason)
local n = 0
local h = redis.call('HMGET', hk, 'qb', 'qc')
local mask, d = split_qb(h[1])
while n < max_n do
  local band, item
  band, item, mask = queue_pop(host, mask, h[2])
  if not item then break end
  redis.call('RPUSH', P .. 'parked', host .. '\t' .. band .. '\t' .. item)
  n = n + 1
end
if mask == 0 then
  redis.call('ZREM', P .. 'ready', host)
  redis.call('HDEL', hk, 'qb')  -- and its due entry, if any, is stale now
else
  write_qb(hk, mask, d)
end
if n > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', -n)
  redis.call('HINCRBY', P .. 'n', 'parked', n)
end
redis.call('HINCRBY', P .. 'tr', host .. '\t' .. reason, n)
return n
