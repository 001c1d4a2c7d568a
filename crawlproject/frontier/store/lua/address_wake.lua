-- address_wake(P, default_conc, then per host: host, ms)
-- On the host's shard: a place at the host's address is its turn (reserved for
-- it from ms from now): a host waiting on its address (`aw`, address_wait.lua)
-- may be claimed again then, or at its own next time if that is later. A host
-- whose `next` moved since it began waiting (claimed after its wait ran out,
-- or held back for another reason) is left as it is. A host not waiting yet
-- (its refusal's address_wait.lua has not run: another worker freed a place
-- in between) gets `awk`, the time it may come, for that script to find.
-- Returns the number of hosts woken.
local dconc = tonumber(ARGV[2])
local woken = 0
for i = 3, #ARGV - 1, 2 do
  local host = ARGV[i]
  local at = NOW + (tonumber(ARGV[i + 1]) or 0)
  local hk = P .. 'h:' .. host
  local h = redis.call('HMGET', hk, 'aw', 'next', 'inflight', 'conc', 'qb', 'awn')
  if h[1] then
    redis.call('HDEL', hk, 'aw', 'awn')
    if tonumber(h[2]) == tonumber(h[1]) then
      local nxt = math.max(tonumber(h[6]) or 0, at)
      redis.call('HSET', hk, 'next', nxt)
      if (tonumber(h[3]) or 0) < (tonumber(h[4]) or dconc) and h[5] then schedule(host, nxt) end
      woken = woken + 1
    end
  else
    redis.call('HSET', hk, 'awk', at)
    woken = woken + 1
  end
end
return woken
