-- tally({host, kind}...): the per-host duplicate streaks and the counters of
-- one host part of the spread index. KEYS[1] its streaks (HASH host ->
-- duplicates in a row), KEYS[2] its counters (HASH new, exact, near).
-- kind 0 (new) ends the host's streak; 1 (exact) and 2 (near) add one to it.
-- Returns each page's streak (0 for a new page).
local names = {[0] = 'new', [1] = 'exact', [2] = 'near'}
local counts = {[0] = 0, [1] = 0, [2] = 0}
local out = {}
for i = 1, #ARGV / 2 do
  local host, kind = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  counts[kind] = counts[kind] + 1
  if kind == 0 then
    redis.call('HDEL', KEYS[1], host)
    out[i] = 0
  else
    out[i] = redis.call('HINCRBY', KEYS[1], host, 1)
  end
end
for kind = 0, 2 do
  if counts[kind] > 0 then redis.call('HINCRBY', KEYS[2], names[kind], counts[kind]) end
end
return out
