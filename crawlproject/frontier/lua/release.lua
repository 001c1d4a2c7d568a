-- release(P, default_delay_ms, default_conc, id, age_ms, id, age_ms, ...)
-- The fetch of each lease is over (its response came back age_ms ago): free
-- its host slot, so the next fetch starts no sooner than delay after that.
-- The lease stays, in state p, until acknowledged.
-- Returns the number of slots released.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local released = 0
for i = 4, #ARGV - 1, 2 do
  local id = ARGV[i]
  -- Clamped, so a bogus age cannot move the host's next fetch far back; the
  -- start-to-start floor set at claim time (claim + delay) holds regardless.
  local age = math.min(math.max(tonumber(ARGV[i + 1]) or 0, 0), ddelay + 60000)
  local v = redis.call('HGET', P .. 'lease', id)
  if v then
    local state, worker, host, req = parse_lease(v)
    if state == 'f' then
      redis.call('HSET', P .. 'lease', id, 'p\t' .. worker .. '\t' .. host .. '\t' .. req)
      release_slot(host, ddelay, dconc, age)
      released = released + 1
    end
  end
end
if released > 0 then redis.call('HINCRBY', P .. 'n', 'releases', released) end
return released
