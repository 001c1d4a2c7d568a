-- claim(P, max_n, lease_ms, default_delay_ms, default_conc, worker, tax)
-- Hands out up to max_n URLs, one per due host, best band first, each under a
-- lease. First, hosts whose time has come move from `ready` to `due`.
-- Credit mode (AOPIC): a URL's credit is c + L - L at enqueue (see the
-- prelude); claiming it pays `tax` of
-- the credit to the lambda cash and hands the rest to the worker, which shares
-- it out over the page's links. The lambda cash is spread evenly over all
-- queued URLs by raising L by cash / queued: O(1), whatever the queue size.
-- Returns {now_ms, next_ready_ms or -1, id1, req1, share1, id2, ...}
-- (share: the credit to pass on; "" in score mode).
local max_n = tonumber(ARGV[2])
local lease_ms = tonumber(ARGV[3])
local ddelay = tonumber(ARGV[4])
local dconc = tonumber(ARGV[5])
local worker = ARGV[6]
local tax = tonumber(ARGV[7]) or 0
local PROMOTE_MAX = math.max(256, 4 * max_n)  -- bounds one call; amortised, one per claim
local out = {NOW, -1}

local L, cash = 0, 0
if CREDIT then
  local a = redis.call('HMGET', P .. 'aopic', 'L', 'cash')
  L, cash = tonumber(a[1]) or 0, tonumber(a[2]) or 0
  local queued = tonumber(redis.call('HGET', P .. 'n', 'queued')) or 0
  if cash > 0 and queued > 0 then
    L = L + cash / queued
    cash = 0
  end
end

-- Hosts whose time has come move from `ready` to `due`.
local seq0 = tonumber(redis.call('GET', P .. 'qseq')) or 0
local seq = seq0
for _, host in ipairs(redis.call('ZRANGEBYSCORE', P .. 'ready', '-inf', NOW, 'LIMIT', 0, PROMOTE_MAX)) do
  redis.call('ZREM', P .. 'ready', host)
  local qb = redis.call('HGET', P .. 'h:' .. host, 'qb')
  local i = qb and string.find(qb, '1', 1, true)
  if i then
    seq = seq + 1
    redis.call('ZADD', P .. 'due', due_score(i - 1, seq), host)
  end
end
if seq > seq0 then redis.call('SET', P .. 'qseq', seq) end

local claimed = 0
-- A few more candidates than wanted: a host holding only stale entries (credit
-- mode) yields nothing and leaves `due`.
for _, host in ipairs(redis.call('ZRANGE', P .. 'due', 0, 2 * max_n + 7)) do
  if claimed >= max_n then break end
  local hk = P .. 'h:' .. host
  redis.call('ZREM', P .. 'due', host)
  local h = redis.call('HMGET', hk, 'inflight', 'delay', 'conc', 'rdelay', 'qb')
  local band, item, qb = queue_pop(host, h[5])
  if item then
    local inflight = (tonumber(h[1]) or 0) + 1
    local delay = host_delay(h[2], h[4], ddelay)
    local conc = tonumber(h[3]) or dconc
    -- With several slots per host, starts are still `delay` apart.
    local nxt = NOW + delay
    redis.call('HSET', hk, 'inflight', inflight, 'next', nxt)
    if inflight < conc and qb then
      redis.call('ZADD', P .. 'ready', nxt, host)
    end
    local id = redis.call('INCR', P .. 'seq')
    redis.call('HSET', P .. 'lease', id, lease_record('f', worker, host, band, item))
    redis.call('ZADD', P .. 'leases', NOW + lease_ms, id)
    claimed = claimed + 1
    out[#out + 1] = id
    if CREDIT then
      local tab = string.find(item, '\t', 9, true)
      local tab2 = string.find(item, '\t', tab + 1, true)
      local lenq = tonumber(string.sub(item, tab + 1, tab2 - 1)) or L
      local credit = math.max(tonumber(string.sub(item, 9, tab - 1)) + L - lenq, 0)
      cash = cash + credit * tax
      out[#out + 1] = string.sub(item, tab2 + 1)
      out[#out + 1] = string.format('%.17g', credit * (1 - tax))
    else
      out[#out + 1] = item
      out[#out + 1] = ''
    end
  end
end
if claimed > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', -claimed)
  redis.call('HINCRBY', P .. 'n', 'leased', claimed)
  redis.call('HINCRBY', P .. 'n', 'claims', claimed)
end
if CREDIT then
  redis.call('HSET', P .. 'aopic', 'L', string.format('%.17g', L), 'cash', string.format('%.17g', cash))
end
if redis.call('ZCARD', P .. 'due') > 0 then
  out[2] = NOW
else
  local first = redis.call('ZRANGE', P .. 'ready', 0, 0, 'WITHSCORES')
  if first[2] then out[2] = tonumber(first[2]) end
end
return out
