-- claim(P, max_n, lease_ms, default_delay_ms, default_conc, worker, tax)
-- Hands out up to max_n URLs, one per due host, best band first, each under a
-- lease. First, hosts whose time has come move from `ready` to their due band.
-- Credit mode (AOPIC): a URL's credit is c + L - Lq (see the prelude);
-- claiming it pays `tax` of the credit to the lambda cash and hands the rest
-- to the worker, which shares it out over the page's links. The lambda cash
-- is spread evenly over all queued URLs by raising L by cash / queued: O(1),
-- whatever the queue size.
-- A parked host's URLs are parked here, not claimed (see park_queue).
-- Returns {now_ms, next_ready_ms or -1, id1, host1, req1, share1, id2, ...}
-- (share: the credit to pass on; "" in score mode).
local max_n = tonumber(ARGV[2])
local lease_ms = tonumber(ARGV[3])
local ddelay = tonumber(ARGV[4])
local dconc = tonumber(ARGV[5])
local worker = ARGV[6]
local tax = tonumber(ARGV[7]) or 0
local PROMOTE_MAX = math.max(256, 4 * max_n)  -- bounds one call; amortised, one per claim
local out = {NOW, -1}

local L, cash, L0, cash0 = 0, 0, 0, 0
if CREDIT then
  local a = call('HMGET', P .. 'aopic', 'L', 'cash')
  L, cash = tonumber(a[1]) or 0, tonumber(a[2]) or 0
  L0, cash0 = L, cash
  if cash > 0 then
    local queued = tonumber(call('HGET', P .. 'n', 'queued')) or 0
    if queued > 0 then
      L = L + cash / queued
      cash = 0
    end
  end
end

-- Hosts whose time has come move from `ready` to their due band.
local ready = P .. 'ready'
local come = call('ZRANGEBYSCORE', ready, '-inf', NOW, 'LIMIT', 0, PROMOTE_MAX)
if #come > 0 then
  call('ZREMRANGEBYRANK', ready, 0, #come - 1)  -- exactly these: the first by score
  for _, host in ipairs(come) do
    local hk = P .. 'h:' .. host
    local mask, d = split_qb(call('HGET', hk, 'qb'))
    local band = first_band(mask)
    if band and d == 0 then write_qb(hk, mask, enter_due(host, band)) end
  end
end

local claimed, taken = 0, 0
local ids, leases, zargs = {}, {}, {}
local seq = tonumber(call('GET', P .. 'seq')) or 0
local db = due_bands()
local db0 = db
local expire = fmt('%d', NOW + lease_ms)
local lease_head = 'f\t' .. worker .. '\t'

-- A parked host (park_host) that has URLs queued again: they came back
-- after it was parked (a requeued or reclaimed lease; add.lua parks new ones),
-- so they are parked too, up to PARK_MAX a call, never claimed.
local PARK_MAX = 100
local parked_n = 0
local function park_queue(host, hk, mask, qc, why)
  local reason = (why == '1') and 'parked' or why
  local n, band, item = 0, nil, nil
  while n < PARK_MAX do
    band, item, mask = queue_pop(host, mask, qc)
    if not item then break end
    call('RPUSH', P .. 'parked', host .. '\t' .. band .. '\t' .. item)
    n = n + 1
  end
  if mask == 0 then
    call('HDEL', hk, 'qb')
  else
    write_qb(hk, mask, 0)
    call('ZADD', ready, NOW_S, host)  -- the rest at the next claim
  end
  if n > 0 then
    parked_n = parked_n + n
    call('HINCRBY', P .. 'tr', host .. '\t' .. reason, n)
  end
end

-- One due host: its best URL under a lease, if it still has one.
local function claim_host(host, dband)
  local hk = P .. 'h:' .. host
  local h = CREDIT and call('HMGET', hk, 'inflight', 'delay', 'conc', 'rdelay', 'qb', 'parked')
    or call('HMGET', hk, 'inflight', 'delay', 'conc', 'rdelay', 'qb', 'parked', 'qc')  -- qc: score mode's
  local mask, d = split_qb(h[5])
  if d ~= dband + 1 then return end  -- stale: it moved, or was claimed
  local qc = (not CREDIT) and h[7] or false
  if h[6] then
    park_queue(host, hk, mask, qc, h[6])
    return
  end
  local band, item
  band, item, mask = queue_pop(host, mask, qc)
  if not item then
    call('HDEL', hk, 'qb')  -- only stale entries were left (credit mode)
    return
  end
  local inflight = (tonumber(h[1]) or 0) + 1
  -- With several slots per host, starts are still `delay` apart.
  local delay = host_delay(h[2], h[4], ddelay)
  local nxt_s = delay == 0 and NOW_S or fmt('%d', NOW + delay)
  if mask == 0 then
    -- Nothing left: qb 0 (one call; a `qb` of 0 reads as no field).
    call('HSET', hk, 'inflight', int_s(inflight), 'next', nxt_s, 'qb', '0')
  else
    -- Claimed, it leaves due (its entry was this one): d = 0.
    call('HSET', hk, 'inflight', int_s(inflight), 'next', nxt_s, 'qb', qb_s(mask, 0))
    if inflight < (tonumber(h[3]) or dconc) then call('ZADD', ready, nxt_s, host) end
  end
  seq = seq + 1
  claimed = claimed + 1
  local id = fmt('%d', seq)
  ids[claimed] = id
  leases[2 * claimed - 1] = id
  leases[2 * claimed] = lease_head .. host .. '\t' .. NUM[band] .. '\t' .. item
  zargs[2 * claimed - 1] = expire
  zargs[2 * claimed] = id
  local n = #out
  out[n + 1] = seq
  out[n + 2] = host
  if CREDIT then
    local c, lq = item_credit(item)
    local credit = math.max(c + L - lq, 0)
    cash = cash + credit * tax
    out[n + 3] = sub(item, 25)
    out[n + 4] = fmt('%.17g', credit * (1 - tax))
  else
    out[n + 3] = item
    out[n + 4] = ''
  end
end

-- A few more candidates than wanted: stale due entries, and hosts holding
-- only stale entries (credit mode), yield nothing.
while claimed < max_n and db ~= 0 and taken < 2 * max_n + 8 do
  local dband = first_band(db)
  local want = max_n - claimed
  local hosts = call('LPOP', P .. 'due:' .. dband, want)
  if not hosts or #hosts < want then db = with_band(db, dband, false) end  -- now empty
  if hosts then
    taken = taken + #hosts
    for _, host in ipairs(hosts) do claim_host(host, dband) end
  end
end
if db ~= db0 then set_due_bands(db) end
if claimed > 0 then
  call('SET', P .. 'seq', ids[claimed])
  call('HSET', P .. 'lease', unpack(leases))
  call('ZADD', P .. 'leases', unpack(zargs))
  call('HINCRBY', P .. 'n', 'queued', -claimed)
  call('HINCRBY', P .. 'n', 'leased', claimed)
  call('HINCRBY', P .. 'n', 'claims', claimed)
end
if parked_n > 0 then
  call('HINCRBY', P .. 'n', 'queued', -parked_n)
  call('HINCRBY', P .. 'n', 'parked', parked_n)
end
if CREDIT and (L ~= L0 or cash ~= cash0) then
  call('HSET', P .. 'aopic', 'L', fmt('%.17g', L), 'cash', fmt('%.17g', cash))
end
if db ~= 0 then
  out[2] = NOW
else
  local first = call('ZRANGE', ready, 0, 0, 'WITHSCORES')
  if first[2] then out[2] = tonumber(first[2]) end
end
return out
