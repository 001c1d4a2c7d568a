-- address_wait(P, default_delay_ms, default_conc, reserve_ms, then per lease: id, wait_ms)
-- On the host's shard: the lease's URL got no place at its host's address
-- (address_take.lua). It goes back to the head of its band unfetched, its host
-- slot is freed as when nothing was sent (release_slot, no contact), and the
-- host stays away wait_ms: until its reserved place's time, or until its
-- address wakes it (address_wake.lua) when a place is its turn; wait_ms also
-- bounds the wait if that wake is lost. While it waits so, h:<host> fields
-- `aw` = the deadline and `awn` = the host's own next time (the wake checks the
-- deadline is still its `next`: nothing else moved it meanwhile). A wake that
-- came first (another worker freed a place between this URL's refusal and
-- now) left `awk`, the time it may come: then it waits only until that.
-- Returns the number of leases sent back.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local reserve_ms = tonumber(ARGV[4])
local n, pushed = 0, 0
for i = 5, #ARGV - 1, 2 do
  local id = ARGV[i]
  local wait = tonumber(ARGV[i + 1]) or 0
  local v = redis.call('HGET', P .. 'lease', id)
  if v then
    local state, worker, host, band, item = parse_lease(v)
    redis.call('HDEL', P .. 'lease', id)
    redis.call('ZREM', P .. 'leases', id)
    pushed = pushed + requeue(host, band, item)
    if state == 'f' then
      release_slot(host, ddelay, dconc, 0, {nocontact = true})
    else
      make_ready(host, ddelay, dconc)
    end
    local hk = P .. 'h:' .. host
    local h = redis.call('HMGET', hk, 'next', 'awk')
    local own = tonumber(h[1]) or NOW
    local woken = tonumber(h[2])
    if woken then
      redis.call('HDEL', hk, 'awk')
      if woken + reserve_ms >= NOW and woken - NOW < wait then wait = woken - NOW end
    end
    local deadline = NOW + wait
    if wait > 0 and deadline > own then
      redis.call('HSET', hk, 'next', deadline, 'aw', deadline, 'awn', own)
      if in_due(host) or redis.call('ZSCORE', P .. 'ready', host) then schedule(host, deadline) end
    end
    n = n + 1
  end
end
if n > 0 then
  count_requeued(n, pushed)
end
return n
