-- add(L, Lmin, Lmax, load, {a, simhash8}...): a new page's SimHash into one
-- part of one near table of the spread index. KEYS as spread_lookup.lua.
-- A SimHash already in its bucket (on an entry boundary) is not added again,
-- so a call run twice (its reply lost, sent again) adds nothing more.
-- Returns {L, s, due} ({-1, L} if the worker assumed another level: nothing
-- done); due 1: the part is over its load (spread_split.lua).
local st = redis.call('HMGET', KEYS[1], 'L', 's', 'n')
local L = tonumber(st[1]) or tonumber(ARGV[2])
if L ~= tonumber(ARGV[1]) then return {-1, L} end
local s, n = tonumber(st[2]) or 0, tonumber(st[3]) or 0
local strings, dirty = {}, {}
local entries = (#ARGV - 4) / 2
for i = 1, entries do
  local a = tonumber(ARGV[3 + 2 * i])
  local entry = ARGV[4 + 2 * i]
  local key = KEYS[a < s and 2 * i + 1 or 2 * i]
  local str = strings[key]
  if str == nil then
    str = redis.call('GET', key) or ''
    strings[key] = str
  end
  local found, init = false, 1
  while true do
    local j = string.find(str, entry, init, true)
    if not j then break end
    if (j - 1) % 8 == 0 then found = true break end
    init = j + 1
  end
  if not found then
    strings[key] = str .. entry
    dirty[key] = true
    n = n + 1
  end
end
local wrote = false
for key in pairs(dirty) do
  redis.call('SET', key, strings[key])
  wrote = true
end
if wrote then redis.call('HSET', KEYS[1], 'L', L, 's', s, 'n', n) end
local due = (L < tonumber(ARGV[3]) and n > tonumber(ARGV[4]) * (2 ^ L + s)) and 1 or 0
return {L, s, due}
