-- The duplicate index's Lua helpers, each written once (issue 42, item 5):
-- prepended to every script of crawlproject/dedupe/lua/, the parts it uses
-- (crawlproject/lua.py; a top-level statement at column 0 is a part;
-- crawlproject/dedupe/calls.py load_script). Names start with near_ or
-- bucket_: a script's own locals of the same names would hide them.
local near_bxor, near_byte = bit.bxor, string.byte
local bucket_byte, bucket_sub, bucket_floor = string.byte, string.sub, math.floor

-- Moves the 8-byte entries of bucket `from` whose byte `at` (1-based) has the
-- bit `mask` set to bucket `to` (a linear-hashing split:
-- spread_split.lua). A bucket is written whole, as the scripts write them.
local function bucket_split(from, to, at, mask)
  local s = redis.call('GET', from)
  if not s then return end
  local stay, move = {}, {}
  for p = 1, #s - 7, 8 do
    if bucket_floor(bucket_byte(s, p + at - 1) / mask) % 2 == 1 then
      move[#move + 1] = bucket_sub(s, p, p + 7)
    else
      stay[#stay + 1] = bucket_sub(s, p, p + 7)
    end
  end
  if #move == 0 then return end
  redis.call('SET', to, table.concat(move))
  if #stay > 0 then redis.call('SET', from, table.concat(stay)) else redis.call('DEL', from) end
end

-- The Hamming distance of two SimHashes inside Redis: the one Lua routine
-- (crawlproject/hamming.py is the Python side's), for spread_lookup.lua.

-- Bits set in a byte: made at the first distance (most calls never need one).
local NEAR_POP

-- The query's 8 bytes (near_query).
local nq1, nq2, nq3, nq4, nq5, nq6, nq7, nq8

local function near_query(q)
  nq1, nq2, nq3, nq4, nq5, nq6, nq7, nq8 = near_byte(q, 1, 8)
end

-- The distance of the entry at e of s (8 bytes) to the query, byte by byte,
-- given up once it is farther than lim (then some number > lim). Few entries
-- get here: those that passed a table's filter byte.
local function near_distance(s, e, lim)
  local pop = NEAR_POP
  if not pop then
    pop = {[0] = 0,
    1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 1, 2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5, 1,
    2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5, 2, 3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 1,
    2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5, 2, 3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 2,
    3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 3, 4, 4, 5, 4, 5, 5, 6, 4, 5, 5, 6, 5, 6, 6, 7, 1,
    2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5, 2, 3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 2,
    3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 3, 4, 4, 5, 4, 5, 5, 6, 4, 5, 5, 6, 5, 6, 6, 7, 2,
    3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 3, 4, 4, 5, 4, 5, 5, 6, 4, 5, 5, 6, 5, 6, 6, 7, 3,
    4, 4, 5, 4, 5, 5, 6, 4, 5, 5, 6, 5, 6, 6, 7, 4, 5, 5, 6, 5, 6, 6, 7, 5, 6, 6, 7, 6, 7, 7, 8}
    NEAR_POP = pop
  end
  local a1, a2, a3, a4, a5, a6, a7, a8 = near_byte(s, e, e + 7)
  local d = pop[near_bxor(a1, nq1)]
  if d <= lim then d = d + pop[near_bxor(a2, nq2)]
  if d <= lim then d = d + pop[near_bxor(a3, nq3)]
  if d <= lim then d = d + pop[near_bxor(a4, nq4)]
  if d <= lim then d = d + pop[near_bxor(a5, nq5)]
  if d <= lim then d = d + pop[near_bxor(a6, nq6)]
  if d <= lim then d = d + pop[near_bxor(a7, nq7)]
  if d <= lim then d = d + pop[near_bxor(a8, nq8)]
  end end end end end end end
  return d
end
