-- reclaim(P, default_delay_ms, default_conc, max_n)
-- Leases past their expiry belong to dead or hung workers: their URLs go back
-- to the head of their bands and their slots are freed.
-- Returns the number reclaimed.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local max_n = tonumber(ARGV[4])
local ids = redis.call('ZRANGEBYSCORE', P .. 'leases', '-inf', NOW, 'LIMIT', 0, max_n)
local n, pushed = 0, 0
for _, id in ipairs(ids) do
  local v = redis.call('HGET', P .. 'lease', id)
  redis.call('ZREM', P .. 'leases', id)
  if v then
    local state, worker, host, band, item = parse_lease(v)
    redis.call('HDEL', P .. 'lease', id)
    pushed = pushed + requeue(host, band, item)
    if state == 'f' then release_slot(host, ddelay, dconc) else make_ready(host, ddelay, dconc) end
    n = n + 1
  end
end
if n > 0 then
  redis.call('HINCRBY', P .. 'n', 'leased', -n)
  redis.call('HINCRBY', P .. 'n', 'queued', pushed)
  redis.call('HINCRBY', P .. 'n', 'reclaimed', n)
end
return n
