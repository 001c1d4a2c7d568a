-- reclaim(P, default_delay_ms, default_conc, max_n, max_reclaims)
-- Leases past their expiry belong to dead or hung workers: their URLs go back
-- to the head of their bands and their slots are freed. Each reclaim of a URL
-- is counted in `reclaims`; a URL reclaimed max_reclaims times (0: no limit)
-- killed or hung every worker that took it (a page that crashes a parser or
-- exhausts memory), so it goes to the `poison` list instead of looping forever.
-- Returns {reclaimed, poisoned}.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local max_n = tonumber(ARGV[4])
local max_reclaims = tonumber(ARGV[5]) or 0
local ids = redis.call('ZRANGEBYSCORE', P .. 'leases', '-inf', NOW, 'LIMIT', 0, max_n)
if #ids == 0 then return {0, 0} end
redis.call('ZREMRANGEBYRANK', P .. 'leases', 0, #ids - 1)  -- exactly these: the first by expiry
local n, pushed, poisoned = 0, 0, 0
for _, id in ipairs(ids) do
  local v = redis.call('HGET', P .. 'lease', id)
  if v then
    local state, worker, host, band, item = parse_lease(v)
    redis.call('HDEL', P .. 'lease', id)
    local key = max_reclaims > 0 and reclaim_key(host, item)
    if key and redis.call('HINCRBY', P .. 'reclaims', key, 1) >= max_reclaims then
      redis.call('HDEL', P .. 'reclaims', key)
      redis.call('RPUSH', P .. 'poison', host .. '\t' .. band .. '\t' .. item)
      poisoned = poisoned + 1
    else
      pushed = pushed + requeue(host, band, item)
    end
    if state == 'f' then release_slot(host, ddelay, dconc) else make_ready(host, ddelay, dconc) end
    n = n + 1
  end
end
if n > 0 then
  count_requeued(n, pushed)
  redis.call('HINCRBY', P .. 'n', 'reclaimed', n)
end
if poisoned > 0 then redis.call('HINCRBY', P .. 'n', 'poisoned', poisoned) end
return {n, poisoned}
