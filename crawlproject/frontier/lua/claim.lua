-- claim(P, max_n, lease_ms, default_delay_ms, default_conc, worker)
-- Hands out up to max_n URLs, one per ready host, each under a lease.
-- Returns {now_ms, next_ready_ms or -1, id1, req1, id2, req2, ...}.
local max_n = tonumber(ARGV[2])
local lease_ms = tonumber(ARGV[3])
local ddelay = tonumber(ARGV[4])
local dconc = tonumber(ARGV[5])
local worker = ARGV[6]
local out = {NOW, -1}
local hosts = redis.call('ZRANGEBYSCORE', P .. 'ready', '-inf', NOW, 'LIMIT', 0, max_n)
local claimed = 0
for _, host in ipairs(hosts) do
  local q = P .. 'q:' .. host
  local req = redis.call('LPOP', q)
  redis.call('ZREM', P .. 'ready', host)
  if req then
    local hk = P .. 'h:' .. host
    local h = redis.call('HMGET', hk, 'inflight', 'delay', 'conc', 'rdelay')
    local inflight = (tonumber(h[1]) or 0) + 1
    local delay = host_delay(h[2], h[4], ddelay)
    local conc = tonumber(h[3]) or dconc
    -- With several slots per host, starts are still `delay` apart.
    local nxt = NOW + delay
    redis.call('HSET', hk, 'inflight', inflight, 'next', nxt)
    if inflight < conc and redis.call('LLEN', q) > 0 then
      redis.call('ZADD', P .. 'ready', nxt, host)
    end
    local id = redis.call('INCR', P .. 'seq')
    redis.call('HSET', P .. 'lease', id, 'f\t' .. worker .. '\t' .. host .. '\t' .. req)
    redis.call('ZADD', P .. 'leases', NOW + lease_ms, id)
    claimed = claimed + 1
    out[#out + 1] = id
    out[#out + 1] = req
  end
end
if claimed > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', -claimed)
  redis.call('HINCRBY', P .. 'n', 'leased', claimed)
  redis.call('HINCRBY', P .. 'n', 'claims', claimed)
end
local first = redis.call('ZRANGE', P .. 'ready', 0, 0, 'WITHSCORES')
if first[2] then out[2] = tonumber(first[2]) end
return out
