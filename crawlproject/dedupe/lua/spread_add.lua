-- add(load, L, Lmin, Lmax, {count, a, simhash8}...): new pages' SimHashes into
-- one part of one near group of the spread index. KEYS as spread_lookup.lua:
-- the part's state, then per entry its two buckets.
--   count    "1" on one table's entry of each page: the part counts pages
--            (its tables hold the same pages), for its load
-- A SimHash already in its bucket (on an entry boundary) is not added again,
-- so a call run twice (its reply lost, sent again) adds nothing more.
-- Returns {0, L, s, due} ({-1, L} if the worker assumed another level:
-- nothing done); due 1: the part is over its load (spread_split.lua).
local st = redis.call('HMGET', KEYS[1], 'L', 's', 'n')
local L = tonumber(st[1]) or tonumber(ARGV[3])
if L ~= tonumber(ARGV[2]) then return {-1, L} end
local S, N = tonumber(st[2]) or 0, tonumber(st[3]) or 0
local n = (#ARGV - 4) / 3
local names = {}
for i = 1, n do
  names[i] = KEYS[tonumber(ARGV[3 + 3 * i]) < S and 2 * i + 1 or 2 * i]
end
local got = redis.call('MGET', unpack(names))
local strings, dirty = {}, {}
for i = 1, n do
  local key, entry = names[i], ARGV[4 + 3 * i]
  local str = strings[key] or got[i] or ''
  local found, init = false, 1
  while true do
    local p = string.find(str, entry, init, true)
    if not p then break end
    if (p - 1) % 8 == 0 then found = true break end
    init = p + 1
  end
  if not found then
    strings[key] = str .. entry
    dirty[#dirty + 1] = key
    if ARGV[2 + 3 * i] == '1' then N = N + 1 end
  elseif not strings[key] then
    strings[key] = str
  end
end
-- A bucket is written whole (it was read whole): APPEND would leave it room to
-- grow, half again its bytes on average.
if #dirty > 0 then
  local sets, seen = {}, {}
  for _, key in ipairs(dirty) do
    if not seen[key] then
      seen[key] = true
      sets[#sets + 1] = key
      sets[#sets + 1] = strings[key]
    end
  end
  redis.call('MSET', unpack(sets))
  redis.call('HSET', KEYS[1], 'L', L, 's', S, 'n', N)
end
local due = (L < tonumber(ARGV[4]) and N > tonumber(ARGV[1]) * (2 ^ L + S)) and 1 or 0
return {0, L, S, due}
