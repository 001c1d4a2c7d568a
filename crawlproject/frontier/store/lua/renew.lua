-- renew(P, lease_ms, id...)
-- Extends leases this worker still holds. Returns the ids that are gone
-- (expired and reclaimed while the worker was stalled).
local lease_ms = tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  if redis.call('ZADD', P .. 'leases', 'XX', 'CH', NOW + lease_ms, id) == 0 then
    if not redis.call('ZSCORE', P .. 'leases', id) then lost[#lost + 1] = id end
  end
end
return lost
