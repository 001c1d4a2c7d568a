-- tally({host, kind}...): the per-host duplicate streaks and the counters of
-- one host part of the spread index. KEYS[1] its streaks (HASH host ->
-- duplicates in a row), KEYS[2] its counters (HASH new, exact, near).
-- kind 0 (new) ends the host's streak; 1 (exact) and 2 (near) add one to it;
-- 3 (a match whose original is the page's own URL: a recheck, no copy)
-- changes nothing, neither counter nor streak (it says nothing about the host).
-- Returns each page's streak (0 for a new page or a recheck).
local names = {[0] = 'new', [1] = 'exact', [2] = 'near'}
local counts = {[0] = 0, [1] = 0, [2] = 0}
local out = {}
for i = 1, #ARGV / 2 do
  local host, kind = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  if kind == 3 then
    out[i] = 0
  elseif kind == 0 then
    counts[0] = counts[0] + 1
    redis.call('HDEL', KEYS[1], host)
    out[i] = 0
  else
    counts[kind] = counts[kind] + 1
    out[i] = redis.call('HINCRBY', KEYS[1], host, 1)
  end
end
for kind = 0, 2 do
  if counts[kind] > 0 then redis.call('HINCRBY', KEYS[2], names[kind], counts[kind]) end
end
return out
