-- split(L, s, Lmin, Lmax, load, {byte, mask}...): one linear-hashing split of
-- a part of the spread index (the exact index's, or a near group's: every
-- table of the group at once, as they hold the same pages): per table, bucket
-- s of level L (KEYS[2i]) keeps the entries whose key bit L is 0 and bucket
-- s + 2^L (KEYS[2i + 1]) takes the others; the entry's byte `byte` (1-8)
-- holds that bit under `mask`. KEYS[1] the part's state. Done only if the
-- part is still at (L, s) and over its load: of workers that saw the same
-- part due, one splits it; a call sent again finds the state moved on and
-- does nothing. Returns {L, s, due} after.
local st = redis.call('HMGET', KEYS[1], 'L', 's', 'n')
local L = tonumber(st[1]) or tonumber(ARGV[3])
local s, n = tonumber(st[2]) or 0, tonumber(st[3]) or 0
local LMAX, LOAD = tonumber(ARGV[4]), tonumber(ARGV[5])
local function due() return (L < LMAX and n > LOAD * (2 ^ L + s)) and 1 or 0 end
if L ~= tonumber(ARGV[1]) or s ~= tonumber(ARGV[2]) or due() == 0 then
  return {L, s, due()}
end
for t = 1, (#ARGV - 5) / 2 do  -- bucket_split: _prelude.lua
  bucket_split(KEYS[2 * t], KEYS[2 * t + 1], tonumber(ARGV[4 + 2 * t]), tonumber(ARGV[5 + 2 * t]))
end
s = s + 1
if s == 2 ^ L then L, s = L + 1, 0 end
redis.call('HSET', KEYS[1], 'L', L, 's', s)
return {L, s, due()}
