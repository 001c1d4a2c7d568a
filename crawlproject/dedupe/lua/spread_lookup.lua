-- lookup(k, L, Lmin, {filter, a, simhash8}...): the near lookups in one part
-- of one near group of the spread index (the tables whose first block is the
-- group's; crawlproject/dedupe/spread_index.py; keys: "dedupe index,
-- spread" in frontier/store/keys.py). Read-only.
-- KEYS[1]: the part's state (HASH L, s, n: its tables hold the same pages, so
-- they share it); then per query two buckets of its table: at level L
-- (a = key mod 2^L) and at level L + 1, of which the split pointer s picks
-- one (a < s: the second). Both are declared, as every key a script touches
-- must be (a slot that migrates holds it off with TRYAGAIN).
--   L, Lmin  the level the worker assumed ({-1, L} if another: nothing read)
--            and the part's first level
--   filter   the query's table's 3 characters: the entry byte (1-8) and the
--            hex mask of the table key's bits in it (layout.py NearTable.filter)
-- Returns {0, L, s, d1, fp1, d2, fp2, ...}: per query the smallest distance
-- <= k and that entry (8 bytes), or -1 and "".
local st = redis.call('HMGET', KEYS[1], 'L', 's')
local L = tonumber(st[1]) or tonumber(ARGV[3])
if L ~= tonumber(ARGV[2]) then return {-1, L} end
local S = tonumber(st[2]) or 0
local K = tonumber(ARGV[1])
local byte, sub = string.byte, string.sub
local band = bit.band
local n = (#ARGV - 3) / 3
local names = {}
for i = 1, n do
  names[i] = KEYS[tonumber(ARGV[2 + 3 * i]) < S and 2 * i + 1 or 2 * i]
end
local strings = redis.call('MGET', unpack(names))
-- The query being judged, read by consider (made once: a function made at
-- every query costs).
local str, best, bestfp
-- An entry that passed the filter (at e): the best so far if nearer
-- (_prelude.lua's distance, given up past the best).
local function consider(e)
  local d = near_distance(str, e, best - 1)
  if d < best then best, bestfp = d, sub(str, e, e + 7) end
end
local out = {0, L, S}
for i = 1, n do
  local filter, q = ARGV[1 + 3 * i], ARGV[3 + 3 * i]
  str = strings[i] or ''
  local at = byte(filter, 1) - 48
  local mask = tonumber(sub(filter, 2, 3), 16)
  local want = band(byte(q, at), mask)
  near_query(q)
  best, bestfp = K + 1, ''
  if mask == 255 then  -- a whole byte of key bits: no mask to apply
    for p = at, #str, 8 do
      if byte(str, p) == want then
        consider(p - at + 1)
        if best == 0 then break end
      end
    end
  else
    for p = at, #str, 8 do
      if band(byte(str, p), mask) == want then
        consider(p - at + 1)
        if best == 0 then break end
      end
    end
  end
  if bestfp == '' then best = -1 end
  out[#out + 1] = best
  out[#out + 1] = bestfp
end
return out
