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
local tune = {factor = tonumber(ARGV[4]), amax = tonumber(ARGV[5]), bmax = tonumber(ARGV[6])}
local released, requeued, pushed = 0, 0, 0
for i = 7, #ARGV - 4, 5 do
  local id = ARGV[i]
  local flags = tonumber(ARGV[i + 4]) or 0
  -- Clamped, so a bogus age cannot move the host's next fetch far back; the
  -- start-to-start floor set at claim time (claim + delay) holds regardless.
  local age = math.min(math.max(tonumber(ARGV[i + 1]) or 0, 0), ddelay + 60000)
  local hold = math.min(math.max(tonumber(ARGV[i + 3]) or 0, 0), tune.bmax)
  local v = redis.call('HGET', P .. 'lease', id)
  if v then
    local state, worker, host, band, item = parse_lease(v)
    local back = flags % 4 >= 2
    if back then
      redis.call('HDEL', P .. 'lease', id)
      redis.call('ZREM', P .. 'leases', id)
      pushed = pushed + requeue(host, band, item)
      requeued = requeued + 1
    elseif state == 'f' then
      redis.call('HSET', P .. 'lease', id, 'p' .. string.sub(v, 2))
    end
    if state == 'f' then
      release_slot(host, ddelay, dconc, age, {
        factor = tune.factor, amax = tune.amax, bmax = tune.bmax,
        fetch = tonumber(ARGV[i + 2]) or -1, hold = hold, throttled = flags % 2 == 1,
        nocontact = flags % 8 >= 4,
      })
      released = released + 1
    elseif back then
      make_ready(host, ddelay, dconc)
    end
  end
end
if released > 0 then redis.call('HINCRBY', P .. 'n', 'releases', released) end
if requeued > 0 then
  redis.call('HINCRBY', P .. 'n', 'leased', -requeued)
  redis.call('HINCRBY', P .. 'n', 'queued', pushed)
  redis.call('HINCRBY', P .. 'n', 'deferred', requeued)
end
return released
