-- check_and_add(P, k, record, host, url, digest10, simhash8, filters, fv, blocks,
--               load, near_min_level, table keys...)
-- The fleet's duplicate index (schema: "dedupe index" in frontier/store/keys.py).
-- KEYS[1] is the crawl's dedupe `cfg` key (it routes the call on Redis Cluster);
-- ARGV[1] is the prefix "cp:{crawl/dd}:"; every key used starts with it.
--   k        the near distance (fixed in `cfg` by the first call)
--   record   "1": remember which URL a new page came from (`o:<bb>`)
--   host     politeness key, for the duplicate streak
--   digest10 the first 10 bytes of the body's SHA-1
--   simhash8 the 64-bit SimHash, 8 bytes big-endian, or "" (exact test only)
--   filters  per table, 3 characters: the entry byte (1-8) and the hex mask
--            of its key bits that an entry must share with the query to be
--            read further (index.py NearTable.filter)
--   fv       the SimHash features version (fixed in `cfg` by the first call;
--            an index from before the field existed is version 1)
--   blocks   the near layout's blocks b (crawlproject/dedupe/index.py): the
--            index's, fixed by its first call; another is refused (the worker
--            reads the index's and sends again)
--   load, near_min_level: the buckets' mean size and the near tables' first
--            level, fixed by the first call
--   table keys: each near table's key of the SimHash (its blocks' bits, the
--            least significant block lowest; at most its low 48 bits), decimal
-- One page per call: the lookups and the insert are atomic, so of two copies
-- checked at once exactly one is new.
-- Returns {kind, distance, streak[, original URL]}: kind 0 new, 1 exact, 2 near,
-- 3 the page's own URL again (see duplicate below).
--
-- Both indexes grow by linear hashing (Litwin 1980) over strings of packed
-- 8-byte entries, so a lookup reads one bucket of about `load` entries per
-- table whatever the index's size: bucket a of level L and split pointer s
-- holds the entries whose key x has x mod 2^L = a, or x mod 2^(L+1) = a where
-- that is below s. Once a part holds more than load x (2^L + s) entries,
-- bucket s splits by bit L of x into s and s + 2^L (one split per `load`
-- inserts). Exact: x = SHA-1 bytes 1-2 (b1 x 256 + b2, so the bucket of level
-- 16 is the index's first layout) + 2^16 x bytes 3-6 read little-endian; an
-- entry is bytes 3-10, and its level starts at 16, so that bucket and entry
-- hold all 80 bits. Near: a table's key is its blocks' bits; entries are the
-- whole SimHash. An index from before this layout (no `b` in `cfg`: fixed
-- buckets, never split) is refused, nothing written (index.py says how).
local P = ARGV[1]
local K = tonumber(ARGV[2])
local record = ARGV[3] == '1'
local host = ARGV[4]
local digest = ARGV[6]
local sim = ARGV[7]
local filters = ARGV[8]
local FV = ARGV[9]
local FIRST_KEY = 13
local byte, sub, floor, fmt = string.byte, string.sub, math.floor, string.format
local EXACT_MIN_LEVEL = 16  -- the bytes an exact entry lacks: 1-2
local MAX_LEVEL = 40  -- key values and their bucket numbers stay exact in Lua's doubles

local cfg = redis.call('HMGET', KEYS[1], 'k', 'fv', 'b', 'load', 'nmin', 'xL', 'xs', 'xn',
  'nL', 'ns', 'nn', 'parts')
local have, have_fv, have_b = cfg[1], cfg[2], cfg[3]
if cfg[12] then
  -- Spread over hash tags (crawlproject/dedupe/spread_index.py): nothing
  -- written; the worker reads the index's layout and sends again.
  return redis.error_reply('ERR dedupe index layout: spread over ' .. cfg[12] .. ' parts')
elseif not have then
  redis.call('HSET', KEYS[1], 'k', ARGV[2], 'fv', FV, 'b', ARGV[10], 'load', ARGV[11],
    'nmin', ARGV[12])
  cfg = {ARGV[2], FV, ARGV[10], ARGV[11], ARGV[12]}
elseif have ~= ARGV[2] then
  return redis.error_reply('ERR dedupe index was created with k=' .. have
    .. ', this worker has k=' .. ARGV[2] .. ' (CRAWL_SIMHASH_K)')
elseif (have_fv or '1') ~= FV then
  -- Its SimHashes (and the recrawl states' copies) are of other features:
  -- compared with this worker's they would be misread.
  return redis.error_reply('ERR dedupe index was created with SimHash features version '
    .. (have_fv or '1') .. ', this worker has version ' .. FV
    .. ' (crawlproject/dedupe/fingerprint.py FEATURES_VERSION): finish the crawl with'
    .. ' the release that started it, or start a new crawl')
elseif not have_b then
  -- Fixed buckets, from a release before this layout: refused (index.py's
  -- DedupeIndex says how), nothing written.
  return redis.error_reply('ERR dedupe index was created with fixed buckets')
elseif have_b ~= ARGV[10] then
  -- Nothing written: the worker reads the index's layout and sends again.
  return redis.error_reply('ERR dedupe index layout: ' .. have_b)
end
local B = tonumber(cfg[3])
local LOAD = tonumber(cfg[4]) or 0
local NEAR_MIN = tonumber(cfg[5]) or 0

-- Each part's level L, split pointer s and pages n: the exact index's, and
-- the near tables' (every new page with a SimHash goes into every table, so
-- they share one). Written out, not in helper functions: a function made at
-- every call costs, and most calls never split.
local xL, xs_, xn = tonumber(cfg[6]) or EXACT_MIN_LEVEL, tonumber(cfg[7]) or 0, tonumber(cfg[8]) or 0
local nL, ns, nn = tonumber(cfg[9]) or NEAR_MIN, tonumber(cfg[10]) or 0, tonumber(cfg[11]) or 0

local b1, b2, b3, b4, b5, b6 = byte(digest, 1, 6)
local x = b1 * 256 + b2 + 65536 * (((b6 * 256 + b5) * 256 + b4) * 256 + b3)
local xa = x % 2 ^ xL
if xa < xs_ then xa = x % 2 ^ (xL + 1) end
local xk = fmt('%sx:%04x', P, xa)

-- Originals: 8-byte page id -> (hash key, field).
local function origin_slot(id)
  local i1, i2 = byte(id, 1, 2)
  return P .. 'o:' .. fmt('%02x%02x', i1, i2), sub(id, 3, 8)
end

-- A match whose original is the page's own URL (a recrawl of an unchanged
-- page, or a page whose worker died after judging it) is no copy: answered
-- 3 (same URL again), nothing counted, its host's streak neither raised nor
-- ended (a recheck says nothing about the host), nothing stored. Only known
-- when originals are recorded.
local function duplicate(kind, distance, ids)
  local url
  if record then
    for _, id in ipairs(ids) do
      local ok, field = origin_slot(id)
      url = redis.call('HGET', ok, field)
      if url then break end
    end
    if url == ARGV[5] then return {3, distance, 0, url} end
  end
  local streak = redis.call('HINCRBY', P .. 'streak', host, 1)
  redis.call('HINCRBY', P .. 'n', kind == 1 and 'exact' or 'near', 1)
  if url then return {kind, distance, streak, url} end
  return {kind, distance, streak}
end

-- Exact: 8-byte entries packed back to back; a match only counts on a boundary.
local xfp = sub(digest, 3, 10)
local xs = redis.call('GET', xk)
if xs then
  local init = 1
  while true do
    local i = string.find(xs, xfp, init, true)
    if not i then break end
    if (i - 1) % 8 == 0 then
      -- Same body, same SimHash: the original is recorded under either id.
      local ids = {sub(digest, 1, 8)}
      if #sim == 8 then ids = {sim, ids[1]} end
      return duplicate(1, 0, ids)
    end
    init = i + 1
  end
end

-- Near: the entries of the tables' buckets the query's keys select that share
-- the table's filter byte with it, compared on all 64 bits, byte by byte,
-- giving up on an entry as soon as it is farther than the best so far
-- (near_distance: _prelude.lua, prepended by calls.py load_script).
local best, bestfp = K + 1, nil
local T = #ARGV - FIRST_KEY + 1
local nkeys, strings = {}, {}
if #sim == 8 then
  local span = 2 ^ nL
  for t = 1, T do
    local key = tonumber(ARGV[FIRST_KEY + t - 1])
    local a = key % span
    if a < ns then a = key % (2 * span) end
    nkeys[t] = fmt('%ss:%d:%04x', P, t - 1, a)
  end
  local band = bit.band
  near_query(sim)
  -- An entry that passed a table's filter (at e of s): the best so far if
  -- nearer (_prelude.lua's distance, given up past the best).
  local function consider(s, e)
    local d = near_distance(s, e, best - 1)
    if d < best then best, bestfp = d, sub(s, e, e + 7) end
  end
  strings = redis.call('MGET', unpack(nkeys))
  for i = 1, T do
    local s = strings[i]
    -- The table's filter byte (index.py NearTable.filter): at is its place in
    -- an entry, mask the key's bits in it. Only an entry whose byte agrees
    -- there is read further: 1 in 256 when the mask is a whole byte.
    local at = byte(filters, 3 * i - 2) - 48
    if s then
      local mask = tonumber(sub(filters, 3 * i - 1, 3 * i), 16)
      local want = band(byte(sim, at), mask)
      if mask == 255 then
        for p = at, #s, 8 do
          if byte(s, p) == want then
            consider(s, p - at + 1)
            if best == 0 then break end
          end
        end
      else
        for p = at, #s, 8 do
          if band(byte(s, p), mask) == want then
            consider(s, p - at + 1)
            if best == 0 then break end
          end
        end
      end
    end
    if best == 0 then break end
  end
end
if bestfp then return duplicate(2, best, {bestfp}) end

-- New: into the exact bucket and every table's; then its origin. A bucket is
-- written whole (it was read whole above): APPEND would leave it room to grow
-- (Redis doubles a string it appends to), half again its bytes on average.
redis.call('SET', xk, (xs or '') .. xfp)
if #sim == 8 then
  for t = 1, T do redis.call('SET', nkeys[t], (strings[t] or '') .. sim) end
end
-- One page more in each part it went into; over its load (load x its
-- buckets), a part splits bucket s by bit L and advances s.
xn = xn + 1
if #sim == 8 then nn = nn + 1 end
-- The narrowest table's key: its B - K blocks the narrowest (B - 64 mod B
-- of floor(64 / B) bits, the others one more); at most 48 bits are sent.
local base, m = floor(64 / B), B - K
local nmax = math.min(base * m + math.max(0, m - (B - 64 % B)), 48, MAX_LEVEL)
local xdue = xL < MAX_LEVEL and xn > LOAD * (2 ^ xL + xs_)
local ndue = #sim == 8 and nL < nmax and nn > LOAD * (2 ^ nL + ns)
if xdue or ndue then
  -- Splitting. The blocks of table t (0-based): the t-th combination, in
  -- lexicographic order, of B - K of the B blocks (0 = most significant; widths
  -- as even as possible, the wider first): index.py's near_tables.
  local function table_blocks(t)
    local m = B - K
    local combo = {}
    for i = 1, m do combo[i] = i - 1 end
    for _ = 1, t do
      local i = m
      while combo[i] == B - m + i - 1 do i = i - 1 end
      combo[i] = combo[i] + 1
      for j = i + 1, m do combo[j] = combo[j - 1] + 1 end
    end
    return combo
  end

  -- The SimHash bit (0 = least significant) that is bit j of table t's key.
  local function key_bit(t, j)
    local base, extra = floor(64 / B), 64 % B
    local combo = table_blocks(t)
    for ci = #combo, 1, -1 do
      local i = combo[ci]
      local width = base + (i < extra and 1 or 0)
      if j < width then return 64 - (i * base + math.min(i, extra)) - width + j end
      j = j - width
    end
  end

  if xdue then
    -- Bit L of x is bit L - 16 of the entry's first 4 bytes, read little-endian.
    local j = xL - EXACT_MIN_LEVEL
    bucket_split(fmt('%sx:%04x', P, xs_), fmt('%sx:%04x', P, xs_ + 2 ^ xL),
      floor(j / 8) + 1, 2 ^ (j % 8))
    xs_ = xs_ + 1
    if xs_ == 2 ^ xL then xL, xs_ = xL + 1, 0 end
  end
  if ndue then
    for t = 0, T - 1 do
      local bit = key_bit(t, nL)  -- in byte 8 - floor(bit / 8) of the big-endian SimHash
      bucket_split(fmt('%ss:%d:%04x', P, t, ns), fmt('%ss:%d:%04x', P, t, ns + 2 ^ nL),
        8 - floor(bit / 8), 2 ^ (bit % 8))
    end
    ns = ns + 1
    if ns == 2 ^ nL then nL, ns = nL + 1, 0 end
  end
end
if #sim == 8 then
  redis.call('HSET', KEYS[1], 'xL', xL, 'xs', xs_, 'xn', xn, 'nL', nL, 'ns', ns, 'nn', nn)
else
  redis.call('HSET', KEYS[1], 'xL', xL, 'xs', xs_, 'xn', xn)
end
if record then
  local ok, field = origin_slot(#sim == 8 and sim or digest)
  redis.call('HSETNX', ok, field, ARGV[5])
end
redis.call('HDEL', P .. 'streak', host)
redis.call('HINCRBY', P .. 'n', 'new', 1)
return {0, -1, 0}
