-- release(P, default_delay_ms, default_conc, factor, amax_ms, bmax_ms,
--         then per lease: id, age_ms, fetch_ms, hold_ms, flags ...)
-- The fetch of each lease is over (its response came back age_ms ago): free
-- its host slot, so the next fetch starts no sooner than the host's delay
-- after that (see release_slot for fetch_ms, hold_ms and the adaptive terms).
-- flags: 1 = throttled (429/503); 2 = requeue: the URL itself was not
-- fetched (its slot served robots.txt, or robots.txt is unreachable) and goes
-- back to the head of its band, lease forgotten; 4 = no contact: the host was
-- not contacted with this slot (e.g. robots.txt forbade the URL).
-- Otherwise the lease stays, in state p, until acknowledged.
-- Returns the number of slots released.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local factor, amax, bmax = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local released, requeued, pushed = 0, 0, 0
local ids = {}
for i = 7, #ARGV - 4, 5 do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then return 0 end
local records = call('HMGET', P .. 'lease', unpack(ids))
local processing, gone = {}, {}  -- HSET lease id 'p...', and leases forgotten
local done = {}  -- ids handled in this call: a repeated one is a no-op
local tuning = {factor = factor, amax = amax, bmax = bmax}  -- one table, refilled per lease
for k = 1, #ids do
  local i = 7 + 5 * (k - 1)
  local id = ids[k]
  local v = not done[id] and records[k]
  done[id] = true
  if v then
    local flags = tonumber(ARGV[i + 4]) or 0
    local state, worker, host, band, item = parse_lease(v)
    local back = flags % 4 >= 2
    if back then
      gone[#gone + 1] = id
      pushed = pushed + requeue(host, band, item)
      requeued = requeued + 1
    elseif state == 'f' then
      processing[#processing + 1] = id
      processing[#processing + 1] = 'p' .. sub(v, 2)
    end
    if state == 'f' then
      -- Clamped, so a bogus age cannot move the host's next fetch far back; the
      -- start-to-start floor set at claim time (claim + delay) holds regardless.
      local age = math.min(math.max(tonumber(ARGV[i + 1]) or 0, 0), ddelay + 60000)
      local hold = math.min(math.max(tonumber(ARGV[i + 3]) or 0, 0), bmax)
      tuning.fetch, tuning.hold = tonumber(ARGV[i + 2]) or -1, hold
      tuning.throttled, tuning.nocontact = flags % 2 == 1, flags % 8 >= 4
      release_slot(host, ddelay, dconc, age, tuning)
      released = released + 1
    elseif back then
      make_ready(host, ddelay, dconc)
    end
  end
end
if #processing > 0 then call('HSET', P .. 'lease', unpack(processing)) end
if #gone > 0 then
  call('HDEL', P .. 'lease', unpack(gone))
  call('ZREM', P .. 'leases', unpack(gone))
end
if released > 0 then call('HINCRBY', P .. 'n', 'releases', released) end
if requeued > 0 then
  count_requeued(requeued, pushed)
  call('HINCRBY', P .. 'n', 'deferred', requeued)
end
return released
