-- The shard's seen set (keys.py: `seen`, `seen:<g>`, `bloom:<i>`; the Python
-- side, sizes and layout check: crawlproject/frontier/seen.py). Prepended to
-- add.lua after _prelude.lua: seen_open(spec) once per call,
-- seen_test_and_add(fp) per URL (true: seen before; false: it was not, and is
-- now; fp's first 8 bytes are the fingerprint, the rest is not read),
-- seen_close() before the call returns.
-- spec: "x <load> <group>" exact; "b <segments> <blocks per segment> <block bytes> <k>" Bloom.
--
-- Exact: linear hashing (Litwin 1980), so the set grows by itself and a link
-- costs the same at any size. Buckets n < 2^L + s are strings of entries
-- packed back to back, `group` of them per hash: bucket n is field n mod group
-- of `seen:<floor(n / group)>`. (As keys of their own, 100M URLs made 3M keys:
-- every command's key lookup, the host queues' too, got slower, and each
-- bucket cost 30 bytes more.) A fingerprint's x is its first 6 bytes read
-- little-endian (byte 1 lowest); its bucket is x mod 2^L, or x mod 2^(L+1)
-- where that is below the split pointer s; that exponent (L or L+1) is the
-- bucket's depth d. The bucket number is x's low d bits, so it implies the
-- fingerprint's first floor(d/8) bytes: an entry is the other 8 - floor(d/8)
-- bytes, and the set is exact over all 64 bits. Once the shard holds more than
-- `load` entries per bucket, bucket s splits by bit L of x into s and s + 2^L
-- (its entries one byte shorter when d + 1 completes a byte) and s advances
-- (at 2^L: L + 1 and s = 0). One split per `load` adds; a link reads one
-- bucket of `load` to 2 x `load` entries, whatever the crawl's size.
-- Buckets are written whole (HSET): appending grows a string's allocation
-- greedily (doubling below 1 MB), which cost a third of the memory.
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
local SEEN_MAX_LEVEL = 40  -- 2^41 buckets at most: their numbers stay exact in key names
local seen_bloom, seen_load, seen_group, seen_blocks, seen_per_segment, seen_block, seen_k
local seen_L, seen_s, seen_n  -- exact: read at the first test of the call
local seen_added = 0
-- Exact, per (L, s) (seen_level): 2^L, 2^(L+1), the split threshold, and per
-- depth L / L + 1 the bytes an entry skips and its width. A test runs only
-- Lua operators and a few library calls: each call costs hundreds of
-- instructions (Redis's Lua is most of a seen test's cost, not its command).
local seen_span, seen_span2, seen_limit, seen_cut, seen_cut2, seen_w, seen_w2
local seen_keys = {}  -- g -> the name of hash `seen:<g>`, made once per call
local byte, strfmt = string.byte, string.format

local function seen_open(spec)
  local f = {}
  for w in string.gmatch(spec, '%S+') do f[#f + 1] = w end
  seen_bloom = f[1] == 'b'
  if seen_bloom then
    seen_per_segment, seen_block, seen_k = tonumber(f[3]), tonumber(f[4]), tonumber(f[5])
    seen_blocks = tonumber(f[2]) * seen_per_segment
  else
    seen_load, seen_group = tonumber(f[2]), tonumber(f[3])
  end
end

local function seen_level(L, s)
  seen_L, seen_s = L, s
  seen_span = 2 ^ L
  seen_span2 = 2 * seen_span
  seen_limit = seen_load * (seen_span + s)
  seen_cut = math.floor(L / 8)
  seen_cut2 = math.floor((L + 1) / 8)
  seen_w, seen_w2 = 8 - seen_cut, 8 - seen_cut2
end

-- Entries are packed back to back: a match only counts on a boundary.
local function seen_contains(s, e, width)
  local init = 1
  while true do
    local i = find(s, e, init, true)
    if not i then return false end
    if (i - 1) % width == 0 then return true end
    init = i + 1
  end
end

-- Bucket n's hash and field, as strings: a number given to redis.call or
-- concatenated is formatted with '%.14g', the costliest step of a seen test;
-- '%d' is a few times cheaper, and a hash's name is made once per call.
local function seen_where(n)
  local f = n % seen_group
  local g = (n - f) / seen_group
  local key = seen_keys[g]
  if not key then
    key = P .. 'seen:' .. strfmt('%d', g)
    seen_keys[g] = key
  end
  return key, strfmt('%d', f)
end

-- Splits bucket s (depth L) into s and s + 2^L (depth L + 1), by bit L of x:
-- bit L % 8 of the entries' first byte (fingerprint byte floor(L/8) + 1).
local function seen_split()
  local L, s = seen_L, seen_s
  local width = seen_w
  local drop = seen_cut2 - seen_cut  -- 1 when L + 1 completes a byte
  local bit = 2 ^ (L % 8)
  local bit2 = 2 * bit
  local src, field = seen_where(s)
  local old = call('HGET', src, field)
  local lo, hi = {}, {}
  local nlo, nhi = 0, 0
  if old then
    local last = width - 1
    for i = 1, #old, width do
      if byte(old, i) % bit2 >= bit then
        nhi = nhi + 1
        hi[nhi] = sub(old, i + drop, i + last)
      else
        nlo = nlo + 1
        lo[nlo] = sub(old, i + drop, i + last)
      end
    end
  end
  if nlo > 0 then
    call('HSET', src, field, table.concat(lo))
  elseif old then
    call('HDEL', src, field)
  end
  if nhi > 0 then
    local dst, dfield = seen_where(s + seen_span)
    call('HSET', dst, dfield, table.concat(hi))
  end
  s = s + 1
  if s == seen_span then
    seen_level(L + 1, 0)
  else
    seen_level(L, s)
  end
end

local function seen_exact(fp)
  if not seen_n then
    local st = call('HMGET', P .. 'seen', 'L', 's', 'n')
    seen_n = tonumber(st[3]) or 0
    seen_level(tonumber(st[1]) or 0, tonumber(st[2]) or 0)
  end
  local b1, b2, b3, b4, b5, b6 = byte(fp, 1, 6)
  local x = ((((b6 * 256 + b5) * 256 + b4) * 256 + b3) * 256 + b2) * 256 + b1
  local a = x % seen_span
  local e, width
  if a < seen_s then
    a = x % seen_span2
    e, width = sub(fp, seen_cut2 + 1, 8), seen_w2
  else
    e, width = sub(fp, seen_cut + 1, 8), seen_w
  end
  local key, field = seen_where(a)
  local s = call('HGET', key, field)
  if s and seen_contains(s, e, width) then return true end
  call('HSET', key, field, s and s .. e or e)
  seen_n = seen_n + 1
  seen_added = seen_added + 1
  if seen_n > seen_limit and seen_L < SEEN_MAX_LEVEL then seen_split() end
  return false
end

local function seen_bloom_test(fp)
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

local function seen_test_and_add(fp)
  if seen_bloom then return seen_bloom_test(fp) end
  return seen_exact(fp)
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
