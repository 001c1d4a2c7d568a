-- The shard's seen set (keys.py: `seen`, `seen:<n>`, `bloom:<i>`; the Python
-- side, sizes and layout check: crawlproject/frontier/store/seen_set.py). Prepended to
-- add.lua after _prelude.lua: seen_open(spec) once per call,
-- seen_test_and_add(fp, member) per URL (true: seen before; false: it was
-- not, and is now; fp's first 8 bytes are the fingerprint, the rest is not
-- read; member, optional: its exact-set member as the worker wrote it, see
-- below),
-- seen_close() before the call returns.
-- spec: "i <load>" exact; "b <segments> <blocks per segment> <block bytes> <k>" Bloom.
--
-- Exact: linear hashing (Litwin 1980) over Redis sets of integers, so the set
-- grows by itself and a link costs one SADD, whatever the crawl's size. A
-- fingerprint's 8 bytes, read little-endian (byte 1 lowest), are the 64-bit
-- v; x is its first 6 bytes (v mod 2^48). Buckets n < 2^L + s (L >= 11) are
-- sets `seen:<n>`; a fingerprint's bucket is x mod 2^L, or x mod 2^(L+1)
-- where that is below the split pointer s. Its member is v >> 11, written in
-- decimal: below 2^53, so Lua's numbers hold it exactly, and the bucket's
-- number holds the 11 bits it lacks, so the set is exact over all 64 bits
-- (two URLs are the same iff their fingerprints are). The worker sends the
-- member in decimal with each link (operation_values.py NewEntry.packed): formatting
-- it here cost ~1.5k Redis instructions a link more than taking it out of
-- the link (4 % of a page); without it (testkit's driver) the script formats
-- it. Redis keeps a set of at most set-max-intset-entries (512) integers as
-- a sorted array of 8-byte integers (an intset): SADD tests and adds with a
-- binary search, and answers 0 or 1, so no bucket's bytes are copied into
-- the script (moving a bucket of 300 bytes into Lua and back was most of a
-- seen test's cost).
-- Once the shard holds more than `load` members per bucket, bucket s splits
-- by bit L of x (bit L - 11 of a member) into s and s + 2^L, and s advances
-- (at 2^L: L + 1 and s = 0): one split per `load` adds; a bucket holds `load`
-- / 2 to 2 x `load` members, far below 512.
--
-- Bloom (blocked: Putze, Sanders and Singler 2007): `segments` strings
-- `bloom:<i>` of `per_segment` blocks of `block` bytes (seen_init.lua made them
-- at full size). A URL's k bits all lie in one block, so a link reads one
-- GETRANGE of a block instead of k bits across the segment, and a new URL
-- sets its missing bits with one BITFIELD. Bytes 1-5 of the fingerprint (40
-- bits) pick the block (mod the shard's blocks); bytes 6-8 (h, 24 bits) the
-- bits in it: h mod B, then steps of 2 (floor(h / B) mod B/2) + 1 (odd, so
-- the k positions mod B = 8 x block are distinct). Bits are numbered as
-- BITFIELD and GETBIT number them, the first byte's high bit first. Every
-- operand stays below 2^53: the arithmetic on Lua's doubles is exact
-- (testkit/seen_table.py computes the same positions).
local SEEN_MIN_LEVEL = 11  -- the bits a member lacks: v >> 11 < 2^53 (seen_set.py MIN_LEVEL)
local SEEN_MAX_LEVEL = 40  -- 2^41 buckets at most: their numbers stay exact
local SEEN_SHIFT = 2 ^ SEEN_MIN_LEVEL
local SEEN_HIGH = 2 ^ (48 - SEEN_MIN_LEVEL)  -- where bytes 7-8 of v land in a member
local SEEN_CHUNK = 1000  -- members per SADD / SREM in a split (unpack's limit)
local seen_bloom, seen_load, seen_blocks, seen_per_segment, seen_block, seen_k
local seen_L, seen_s, seen_n  -- exact: read at the first test of the call
local seen_added = 0
-- Exact, per (L, s) (seen_level): 2^L, 2^(L+1), the split threshold. A test
-- runs only Lua operators and a few library calls: each costs hundreds of
-- instructions, a number formatted '%d' about as much as a command's reply.
local seen_span, seen_span2, seen_limit
local byte, strfmt = string.byte, string.format
-- The kind's test, chosen by seen_open (one function call a link, not two).
local seen_exact, seen_bloom_test, seen_test_and_add

local function seen_open(spec)
  local f = {}
  for w in string.gmatch(spec, '%S+') do f[#f + 1] = w end
  seen_bloom = f[1] == 'b'
  if seen_bloom then
    seen_per_segment, seen_block, seen_k = tonumber(f[3]), tonumber(f[4]), tonumber(f[5])
    seen_blocks = tonumber(f[2]) * seen_per_segment
  else
    seen_load = tonumber(f[2])
  end
  seen_test_and_add = seen_bloom and seen_bloom_test or seen_exact
end

local function seen_level(L, s)
  seen_L, seen_s = L, s
  seen_span = 2 ^ L
  seen_span2 = 2 * seen_span
  seen_limit = seen_load * (seen_span + s)
end

-- Bucket n's key, made by one string.format: a number given to redis.call or
-- concatenated is formatted with '%.14g' (printf's costlier floating-point
-- path, and not exact past 14 digits), and each string a script makes costs
-- (its hash, its allocation, the collector's work later).
local SEEN_KEY = string.gsub(P, '%%', '%%%%') .. 'seen:%d'
local function seen_key(n)
  return strfmt(SEEN_KEY, n)
end

local function seen_in_chunks(cmd, key, list)
  for i = 1, #list, SEEN_CHUNK do
    call(cmd, key, unpack(list, i, math.min(i + SEEN_CHUNK - 1, #list)))
  end
end

-- Splits bucket s (depth L) into s and s + 2^L: the members whose bit L - 11
-- (x's bit L) is set move.
local function seen_split()
  local L, s = seen_L, seen_s
  local src = seen_key(s)
  local bit = 2 ^ (L - SEEN_MIN_LEVEL)
  local move = {}
  for _, m in ipairs(call('SMEMBERS', src)) do
    if floor(tonumber(m) / bit) % 2 == 1 then move[#move + 1] = m end
  end
  if #move > 0 then
    seen_in_chunks('SADD', seen_key(s + seen_span), move)
    seen_in_chunks('SREM', src, move)
  end
  s = s + 1
  if s == seen_span then
    seen_level(L + 1, 0)
  else
    seen_level(L, s)
  end
end

function seen_exact(fp, member)
  if not seen_n then
    local st = call('HMGET', P .. 'seen', 'L', 's', 'n')
    seen_n = tonumber(st[3]) or 0
    seen_level(tonumber(st[1]) or SEEN_MIN_LEVEL, tonumber(st[2]) or 0)
  end
  local b1, b2, b3, b4, b5, b6 = byte(fp, 1, 6)
  local x = ((((b6 * 256 + b5) * 256 + b4) * 256 + b3) * 256 + b2) * 256 + b1
  local a = x % seen_span
  if a < seen_s then a = x % seen_span2 end
  if not member then
    local b7, b8 = byte(fp, 7, 8)
    member = strfmt('%d', floor(x / SEEN_SHIFT) + SEEN_HIGH * (b8 * 256 + b7))
  end
  if call('SADD', seen_key(a), member) == 0 then return true end
  seen_n = seen_n + 1
  seen_added = seen_added + 1
  if seen_n > seen_limit and seen_L < SEEN_MAX_LEVEL then seen_split() end
  return false
end

function seen_bloom_test(fp)
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(fp, 1, 8)
  local block = ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) % seen_blocks
  local seg = math.floor(block / seen_per_segment)
  local at = (block - seg * seen_per_segment) * seen_block
  local bits = seen_block * 8
  local h = (b6 * 256 + b7) * 256 + b8
  local p = h % bits
  local step = 2 * (math.floor(h / bits) % (bits / 2)) + 1
  local key = P .. 'bloom:' .. seg
  local s = redis.call('GETRANGE', key, at, at + seen_block - 1)
  local set
  for _ = 1, seen_k do
    local byte = string.byte(s, math.floor(p / 8) + 1) or 0
    if math.floor(byte / 2 ^ (7 - p % 8)) % 2 == 0 then
      set = set or {'BITFIELD', key}
      set[#set + 1] = 'SET'
      set[#set + 1] = 'u1'
      set[#set + 1] = at * 8 + p
      set[#set + 1] = 1
    end
    p = (p + step) % bits
  end
  if not set then return true end
  redis.call(unpack(set))
  seen_added = seen_added + 1
  return false
end

-- `seen` n counts the URLs added (both kinds; Bloom: its fill); exact keeps L and s there.
local function seen_close()
  if seen_added == 0 then return end
  if seen_bloom then
    redis.call('HINCRBY', P .. 'seen', 'n', seen_added)
  else
    redis.call('HSET', P .. 'seen', 'L', seen_L, 's', seen_s, 'n', seen_n)
  end
end
