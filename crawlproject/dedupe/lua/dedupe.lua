-- check_and_add(P, k, record, host, url, digest10, simhash8, order, fv, nearkey...)
-- The fleet's duplicate index (schema: "dedupe index" in frontier/keys.py).
-- KEYS[1] is the crawl's dedupe `cfg` key (it routes the call on Redis Cluster);
-- ARGV[1] is the prefix "cp:{crawl/dd}:"; every key used starts with it.
--   k        the near distance (fixed in `cfg` by the first call)
--   record   "1": remember which URL a new page came from (`o:<bb>`)
--   host     politeness key, for the duplicate streak
--   digest10 the first 10 bytes of the body's SHA-1
--   simhash8 the 64-bit SimHash, 8 bytes big-endian, or "" (exact test only)
--   order    one letter per block: "b" scan entries from their last byte, "f"
--            from their first (start with the bytes the block does not cover)
--   fv       the SimHash features version (fixed in `cfg` by the first call;
--            an index from before the field existed is version 1)
--   nearkey  the k+1 near-index strings the SimHash's blocks select
-- One page per call: the lookups and the insert are atomic, so of two copies
-- checked at once exactly one is new.
-- Returns {kind, distance, streak[, original URL]}: kind 0 new, 1 exact, 2 near.
local P = ARGV[1]
local K = tonumber(ARGV[2])
local record = ARGV[3] == '1'
local host = ARGV[4]
local digest = ARGV[6]
local sim = ARGV[7]
local order = ARGV[8]

local FV = ARGV[9]
local cfg = redis.call('HMGET', KEYS[1], 'k', 'fv')
local have, have_fv = cfg[1], cfg[2]
if not have then
  redis.call('HSET', KEYS[1], 'k', ARGV[2], 'fv', FV)
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
end

-- Originals: 8-byte page id -> (hash key, field).
local function origin_slot(id)
  local b1, b2 = string.byte(id, 1, 2)
  return P .. 'o:' .. string.format('%02x%02x', b1, b2), string.sub(id, 3, 8)
end

local function duplicate(kind, distance, ids)
  local streak = redis.call('HINCRBY', P .. 'streak', host, 1)
  redis.call('HINCRBY', P .. 'n', kind == 1 and 'exact' or 'near', 1)
  if record then
    for _, id in ipairs(ids) do
      local ok, field = origin_slot(id)
      local url = redis.call('HGET', ok, field)
      if url then return {kind, distance, streak, url} end
    end
  end
  return {kind, distance, streak}
end

-- Exact: 8-byte entries packed back to back; a match only counts on a boundary.
local b1, b2 = string.byte(digest, 1, 2)
local xk = P .. 'x:' .. string.format('%02x%02x', b1, b2)
local xfp = string.sub(digest, 3, 10)
local xs = redis.call('GET', xk)
if xs then
  local init = 1
  while true do
    local i = string.find(xs, xfp, init, true)
    if not i then break end
    if (i - 1) % 8 == 0 then
      -- Same body, same SimHash: the original is recorded under either id.
      local ids = {string.sub(digest, 1, 8)}
      if #sim == 8 then ids = {sim, ids[1]} end
      return duplicate(1, 0, ids)
    end
    init = i + 1
  end
end

-- Near: every entry of the k+1 strings the query's blocks select, compared on
-- all 64 bits, byte by byte (POP[x] = bits set in x), giving up on an entry
-- as soon as it is farther than the best so far.
local best, bestfp = K + 1, nil
if #sim == 8 then
  local POP = {[0] = 0,
  1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 1, 2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5, 1,
  2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5, 2, 3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 1,
  2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5, 2, 3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 2,
  3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 3, 4, 4, 5, 4, 5, 5, 6, 4, 5, 5, 6, 5, 6, 6, 7, 1,
  2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5, 2, 3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 2,
  3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 3, 4, 4, 5, 4, 5, 5, 6, 4, 5, 5, 6, 5, 6, 6, 7, 2,
  3, 3, 4, 3, 4, 4, 5, 3, 4, 4, 5, 4, 5, 5, 6, 3, 4, 4, 5, 4, 5, 5, 6, 4, 5, 5, 6, 5, 6, 6, 7, 3,
  4, 4, 5, 4, 5, 5, 6, 4, 5, 5, 6, 5, 6, 6, 7, 4, 5, 5, 6, 5, 6, 6, 7, 5, 6, 6, 7, 6, 7, 7, 8}
  local bxor, byte = bit.bxor, string.byte
  local q1, q2, q3, q4, q5, q6, q7, q8 = byte(sim, 1, 8)
  local strings = redis.call('MGET', unpack(ARGV, 10, 10 + K))
  for i = 1, K + 1 do
    local s = strings[i]
    if s then
      local lim = best - 1
      local last = #s - 7
      -- The two loops differ only in which byte of an entry they compare
      -- first (its first, or its last): written out twice on purpose, as a
      -- test or a byte permutation per entry would cost in the index's
      -- hottest loop.
      if string.sub(order, i, i) == 'f' then
        for p = 1, last, 8 do
          local a1, a2, a3, a4, a5, a6, a7, a8 = byte(s, p, p + 7)
          local d = POP[bxor(a1, q1)]
          if d <= lim then d = d + POP[bxor(a2, q2)]
          if d <= lim then d = d + POP[bxor(a3, q3)]
          if d <= lim then d = d + POP[bxor(a4, q4)]
          if d <= lim then d = d + POP[bxor(a5, q5)]
          if d <= lim then d = d + POP[bxor(a6, q6)]
          if d <= lim then d = d + POP[bxor(a7, q7)]
          if d <= lim then d = d + POP[bxor(a8, q8)]
          if d <= lim then
            best, bestfp, lim = d, string.sub(s, p, p + 7), d - 1
            if lim < 0 then break end
          end end end end end end end end
        end
      else
        for p = 1, last, 8 do
          local a1, a2, a3, a4, a5, a6, a7, a8 = byte(s, p, p + 7)
          local d = POP[bxor(a8, q8)]
          if d <= lim then d = d + POP[bxor(a7, q7)]
          if d <= lim then d = d + POP[bxor(a6, q6)]
          if d <= lim then d = d + POP[bxor(a5, q5)]
          if d <= lim then d = d + POP[bxor(a4, q4)]
          if d <= lim then d = d + POP[bxor(a3, q3)]
          if d <= lim then d = d + POP[bxor(a2, q2)]
          if d <= lim then d = d + POP[bxor(a1, q1)]
          if d <= lim then
            best, bestfp, lim = d, string.sub(s, p, p + 7), d - 1
            if lim < 0 then break end
          end end end end end end end end
        end
      end
      if best == 0 then break end
    end
  end
end
if bestfp then return duplicate(2, best, {bestfp}) end

-- New: into the exact bucket and every block string; then its origin.
redis.call('APPEND', xk, xfp)
if #sim == 8 then
  for i = 1, K + 1 do redis.call('APPEND', ARGV[9 + i], sim) end
end
if record then
  local ok, field = origin_slot(#sim == 8 and sim or digest)
  redis.call('HSETNX', ok, field, ARGV[5])
end
redis.call('HDEL', P .. 'streak', host)
redis.call('HINCRBY', P .. 'n', 'new', 1)
return {0, -1, 0}
