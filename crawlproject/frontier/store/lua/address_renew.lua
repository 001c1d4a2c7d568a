-- address_renew(P, lease_ms, then per place: address, lease token)
-- Extends the places of leases this worker still holds, as renew.lua extends
-- the leases. Returns the tokens whose place is gone (expired and dropped
-- while the worker was stalled).
local lease_ms = tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV - 1, 2 do
  local key = P .. 'al:' .. ARGV[i]
  if redis.call('ZADD', key, 'XX', 'CH', NOW + lease_ms, ARGV[i + 1]) == 0 then
    if not redis.call('ZSCORE', key, ARGV[i + 1]) then lost[#lost + 1] = ARGV[i + 1] end
  end
end
return lost
