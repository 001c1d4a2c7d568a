-- release(P, default_delay_ms, default_conc, id...)
-- The fetch of each lease is over: free its host slot (next fetch no sooner
-- than now + delay). The lease stays, in state p, until acknowledged.
-- Returns the number of slots released.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local released = 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local v = redis.call('HGET', P .. 'lease', id)
  if v then
    local state, worker, host, req = parse_lease(v)
    if state == 'f' then
      redis.call('HSET', P .. 'lease', id, 'p\t' .. worker .. '\t' .. host .. '\t' .. req)
      release_slot(host, ddelay, dconc)
      released = released + 1
    end
  end
end
if released > 0 then redis.call('HINCRBY', P .. 'n', 'releases', released) end
return released
