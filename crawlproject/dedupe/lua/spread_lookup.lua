-- lookup(L, Lmin, k, filter, {a, simhash8}...): the near lookups of one part
-- of one near table of the spread index (crawlproject/dedupe/spread_index.py;
-- keys: "dedupe index, spread" in frontier/keys.py). Read-only.
-- KEYS[1] the part's state (HASH L, s, n); then per query two buckets: its
-- bucket at level L (a = key mod 2^L) and at level L + 1, of which the split
-- pointer s picks one (a < s: the second). Both are declared, as every key a
-- script touches must be (a slot that migrates holds it off with TRYAGAIN).
--   L        the level the worker assumed; another: nothing read, {-1, L}
--   Lmin     the part's first level (no state yet)
--   k        the near distance
--   filter   3 characters: the entry byte (1-8) and the hex mask of the
--            table key's bits in it (layout.py NearTable.filter)
-- Returns {L, s, d1, fp1, d2, fp2, ...}: per query the smallest distance
-- <= k and that entry (8 bytes), or -1 and "".
local st = redis.call('HMGET', KEYS[1], 'L', 's')
local L = tonumber(st[1]) or tonumber(ARGV[2])
if L ~= tonumber(ARGV[1]) then return {-1, L} end
local s = tonumber(st[2]) or 0
local K = tonumber(ARGV[3])
local at = string.byte(ARGV[4], 1) - 48
local mask = tonumber(string.sub(ARGV[4], 2, 3), 16)
local byte, sub = string.byte, string.sub
local bxor, band = bit.bxor, bit.band
-- Bits set in a byte: made when an entry first passes the filter (most
-- calls never need it).
local POP
local function make_pop()
  POP = {[0] = 0}
  for i = 1, 255 do POP[i] = POP[math.floor(i / 2)] + i % 2 end
end
local strings = {}
local out = {L, s}
local n = (#ARGV - 4) / 2
for i = 1, n do
  local a = tonumber(ARGV[3 + 2 * i])
  local q = ARGV[4 + 2 * i]
  local key = KEYS[a < s and 2 * i + 1 or 2 * i]
  local str = strings[key]
  if str == nil then
    str = redis.call('GET', key) or ''
    strings[key] = str
  end
  local want = band(byte(q, at), mask)
  local q1, q2, q3, q4, q5, q6, q7, q8 = byte(q, 1, 8)
  local best, bestfp = K + 1, ''
  for p = at, #str, 8 do
    if band(byte(str, p), mask) == want then
      if not POP then make_pop() end
      local e = p - at + 1
      local lim = best - 1
      local a1, a2, a3, a4, a5, a6, a7, a8 = byte(str, e, e + 7)
      local d = POP[bxor(a1, q1)]
      if d <= lim then d = d + POP[bxor(a2, q2)]
      if d <= lim then d = d + POP[bxor(a3, q3)]
      if d <= lim then d = d + POP[bxor(a4, q4)]
      if d <= lim then d = d + POP[bxor(a5, q5)]
      if d <= lim then d = d + POP[bxor(a6, q6)]
      if d <= lim then d = d + POP[bxor(a7, q7)]
      if d <= lim then d = d + POP[bxor(a8, q8)]
      if d <= lim then
        best, bestfp = d, sub(str, e, e + 7)
        if d == 0 then break end
      end end end end end end end end
    end
  end
  if bestfp == '' then best = -1 end
  out[#out + 1] = best
  out[#out + 1] = bestfp
end
return out
