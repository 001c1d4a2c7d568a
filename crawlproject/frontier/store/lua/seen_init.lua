-- seen_init(P, first, count, bytes) on KEYS = the shard's `ready` (it routes
-- the call on Redis Cluster) and `slotguard` (_prelude.lua): creates the shard's Bloom segments
-- `bloom:<first>` .. `bloom:<first + count - 1>` at their full size, zeroed.
-- SETRANGE on a missing key allocates exactly that size once, where bits set
-- one at a time would grow the string in greedy steps (up to twice its size).
-- A segment that exists already is left as it is.
local P = ARGV[1]
local first, count, bytes = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local made = 0
for i = first, first + count - 1 do
  local key = P .. 'bloom:' .. i
  if redis.call('EXISTS', key) == 0 then
    redis.call('SETRANGE', key, bytes - 1, '\0')
    made = made + 1
  end
end
return made
