-- exact(L, Lmin, Lmax, load, sig, {a, entry8, near}...): the exact check and
-- add of one part of the spread index's exact index, for pages in order.
-- KEYS[1] the part's state (HASH L, s, n, sig); per page its bucket at level
-- L and at level L + 1 (the split pointer s picks one), as spread_lookup.lua.
--   L, Lmin  the level the worker assumed ({-1, L} if another, nothing
--            done) and the part's first level
--   Lmax     the part's last level; load: entries a bucket on average
--   sig      the index's layout (Spread.signature): the part records it at its
--            first page; a worker of another layout is refused, nothing written
--   entry8   SHA-1 bytes 3-10 (bucket and part hold the rest)
--   near     "1": the page's SimHash has a near copy in the index
-- Per page: its body is in the bucket (on an entry boundary): 1 (exact);
-- else near: 2 (not stored: a near copy is never stored);
-- else it is stored: 0 (new). Atomic on the digest's slot: of two copies of a
-- body exactly one is new.
-- Returns {0, L, s, due, kind1, kind2, ...}; due 1: the part is over its
-- load (the worker splits bucket s, spread_split.lua).
local st = redis.call('HMGET', KEYS[1], 'L', 's', 'n', 'sig')
local L = tonumber(st[1]) or tonumber(ARGV[2])
if st[4] and st[4] ~= ARGV[5] then
  return redis.error_reply('ERR dedupe index layout: part ' .. st[4] .. ', this worker '
    .. ARGV[5])
end
if L ~= tonumber(ARGV[1]) then return {-1, L} end
local s, n = tonumber(st[2]) or 0, tonumber(st[3]) or 0
local strings, dirty = {}, {}
local out = {0, L, s, 0}
local pages = (#ARGV - 5) / 3
for i = 1, pages do
  local a = tonumber(ARGV[3 + 3 * i])
  local entry = ARGV[4 + 3 * i]
  local key = KEYS[a < s and 2 * i + 1 or 2 * i]
  local str = strings[key]
  if str == nil then
    str = redis.call('GET', key) or ''
    strings[key] = str
  end
  local kind, init = nil, 1
  while true do
    local j = string.find(str, entry, init, true)
    if not j then break end
    if (j - 1) % 8 == 0 then kind = 1 break end
    init = j + 1
  end
  if not kind then
    if ARGV[5 + 3 * i] == '1' then
      kind = 2
    else
      kind = 0
      strings[key] = str .. entry
      dirty[key] = true
      n = n + 1
    end
  end
  out[#out + 1] = kind
end
-- A bucket is written whole (it was read whole): APPEND would leave it room to
-- grow, half again its bytes on average.
local wrote = false
for key in pairs(dirty) do
  redis.call('SET', key, strings[key])
  wrote = true
end
if wrote or not st[4] then
  redis.call('HSET', KEYS[1], 'L', L, 's', s, 'n', n, 'sig', ARGV[5])
end
if L < tonumber(ARGV[3]) and n > tonumber(ARGV[4]) * (2 ^ L + s) then out[4] = 1 end
return out
