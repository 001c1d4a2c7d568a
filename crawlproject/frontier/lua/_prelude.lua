-- Shared helpers, prepended to every frontier script (see keys.py for the schema).
-- KEYS[1] is the shard's `ready` key (it routes the call on Redis Cluster);
-- ARGV[1] is the shard prefix "cp:{crawl/shard}:"; every key used below starts
-- with it, so one script only ever touches one hash slot.
local P = ARGV[1]
local t = redis.call('TIME')
local NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- A host's queue is BANDS priority bands (Mercator's front queues, per host):
-- LISTs `q:<host>:<band>`, band 0 first, FIFO within a band; h:<host> `qb`
-- is a string of BANDS '0'/'1' marking the non-empty ones. The crawl's mode
-- (`mode` key: score | credit) says what a list entry is:
--   score:  the request itself;
--   credit: (AOPIC) the URL's 8-byte fingerprint. `b:<host>` holds, while
--           it is queued, its body (field fingerprint -> L at enqueue .. "\t" ..
--           request) and its credit received from links (field fingerprint
--           .. "+" -> c; one hash: the bodies keep it in hashtable encoding,
--           where each field is O(1), unlike a small hash of credits);
--           its credit is c + L - L at enqueue (L: the shard's lambda offset).
--           Its band is band_of(c); credit that lifts it to a better band
--           pushes a second entry there, and the old one, whose band no longer
--           matches band_of(c), is skipped as stale.
-- Functions below take and return an "item": the request (score mode) or
-- fingerprint .. c .. "\t" .. L at enqueue .. "\t" .. request (credit mode).
local BANDS = 32
local NO_BANDS = string.rep('0', BANDS)
local CREDIT = redis.call('GET', P .. 'mode') == 'credit'

local function set_band(h_qb, band, on)
  local qb = h_qb or NO_BANDS
  return string.sub(qb, 1, band) .. (on and '1' or '0') .. string.sub(qb, band + 2)
end

-- Band of a score (score mode: rounded, clamped) or of a credit c (credit
-- mode: half-octave steps, credit 1 in band 8, 16 and more in band 0).
local function band_of(x)
  local b
  if CREDIT then
    if x <= 0 then return BANDS - 1 end
    b = 8 - math.floor(2 * math.log(x) / math.log(2) + 0.5)
  else
    b = math.floor(x + 0.5)
  end
  if b < 0 then return 0 end
  if b >= BANDS then return BANDS - 1 end
  return b
end

-- Appends (or, `front`, prepends) a list entry to band `band` of the host.
-- Returns true if the host had nothing queued before, and its new band
-- string. `qb`: the host's band string if the caller has it (false: none).
local function push_entry(host, band, entry, front, qb)
  local hk = P .. 'h:' .. host
  if qb == nil then qb = redis.call('HGET', hk, 'qb') end
  qb = qb or NO_BANDS
  local was_empty = not string.find(qb, '1', 1, true)
  redis.call(front and 'LPUSH' or 'RPUSH', P .. 'q:' .. host .. ':' .. band, entry)
  if string.sub(qb, band + 1, band + 1) ~= '1' then
    qb = set_band(qb, band, true)
    redis.call('HSET', hk, 'qb', qb)
  end
  return was_empty, qb
end

-- Queues an item in band `band` (see push_entry for the rest).
local function queue_push(host, band, item, front, qb)
  if not CREDIT then return push_entry(host, band, item, front, qb) end
  local fp = string.sub(item, 1, 8)
  local tab = string.find(item, '\t', 9, true)
  redis.call('HSET', P .. 'b:' .. host, fp, string.sub(item, tab + 1), fp .. '+', string.sub(item, 9, tab - 1))
  return push_entry(host, band, fp, front, qb)
end

-- The host's best item: band, item, and the band string left (false: empty);
-- or nil. Clears bands it empties. `qb`: as for push_entry.
local function queue_pop(host, qb)
  local hk = P .. 'h:' .. host
  if qb == nil then qb = redis.call('HGET', hk, 'qb') end
  if not qb then return nil end
  local band0 = string.find(qb, '1', 1, true)
  while band0 do
    local band = band0 - 1
    local key = P .. 'q:' .. host .. ':' .. band
    local entry = redis.call('LPOP', key)
    local item
    if entry and CREDIT then
      local v = redis.call('HMGET', P .. 'b:' .. host, entry .. '+', entry)
      if v[1] and band_of(tonumber(v[1])) == band then
        item = entry .. v[1] .. '\t' .. (v[2] or '0\t')
        redis.call('HDEL', P .. 'b:' .. host, entry, entry .. '+')
      end  -- else a stale entry (moved to a better band, or claimed): skipped
    else
      item = entry
    end
    if not entry or redis.call('LLEN', key) == 0 then
      qb = set_band(qb, band, false)
      if string.find(qb, '1', 1, true) then
        redis.call('HSET', hk, 'qb', qb)
      else
        redis.call('HDEL', hk, 'qb')
        qb = false
      end
    end
    if item then return band, item, qb end
    if not qb then return nil end
    band0 = string.find(qb, '1', 1, true)
  end
  return nil
end

local function best_band(host)
  local qb = redis.call('HGET', P .. 'h:' .. host, 'qb')
  local i = qb and string.find(qb, '1', 1, true)
  return i and i - 1
end

-- The request inside an item.
local function item_request(item)
  if not CREDIT then return item end
  local tab = string.find(item, '\t', 9, true)
  return string.sub(item, string.find(item, '\t', tab + 1, true) + 1)
end

-- A URL's field in `reclaims`: the first 8 bytes of its request's SHA-1, in
-- hex. The request is the same bytes at every claim of the URL, and score
-- mode has no fingerprint at hand; only reclaimed URLs ever get a field.
local function reclaim_key(item)
  return string.sub(redis.sha1hex(item_request(item)), 1, 16)
end

-- A host with queued URLs and a free slot is in `ready` (scored by the time it
-- may be fetched) until that time passes; claim then moves it to `due`,
-- scored band * SEQ_SPAN + seq (seq from `qseq`), so the best band goes first
-- and, within a band, the first due. Its band there is always its best band.
local SEQ_SPAN = 2 ^ 40  -- seq wraps after 2^40 due entries: only FIFO order suffers

local function due_score(band, seq)
  return band * SEQ_SPAN + seq % SEQ_SPAN
end

local function in_due(host)
  return redis.call('ZSCORE', P .. 'due', host)
end

-- A better URL reached a due host: it moves up, keeping its seq.
local function raise_due(host, band)
  local sc = tonumber(in_due(host))
  if sc and band < math.floor(sc / SEQ_SPAN) then
    redis.call('ZADD', P .. 'due', 'XX', due_score(band, sc), host)
  end
end

local function leave_due(host)
  redis.call('ZREM', P .. 'due', host)
end

-- Claimable from `nxt` (ms): a due host stays due unless it must now wait.
local function schedule(host, nxt)
  if nxt > NOW then
    leave_due(host)
  elseif in_due(host) then
    return
  end
  redis.call('ZADD', P .. 'ready', nxt, host)
end

-- A host enters `ready` when it has queued URLs and a free slot; its score is
-- the earliest time it may be fetched again.
local function make_ready(host, ddelay, dconc)
  local h = redis.call('HMGET', P .. 'h:' .. host, 'inflight', 'next', 'conc', 'qb')
  if not h[4] then return end
  local inflight = tonumber(h[1]) or 0
  local conc = tonumber(h[3]) or dconc
  if inflight < conc and not in_due(host) then
    local nxt = tonumber(h[2]) or 0
    if nxt < NOW then nxt = NOW end
    redis.call('ZADD', P .. 'ready', 'NX', nxt, host)
  end
end

-- A host's politeness delay (ms): its own (CRAWL_HOST_OVERRIDES) or the crawl's
-- default, raised to its robots.txt Crawl-delay when that is longer.
local function host_delay(own, robots, ddelay)
  local delay = tonumber(own) or ddelay
  local rdelay = tonumber(robots) or 0
  if rdelay > delay then delay = rdelay end
  return delay
end

-- Frees one slot of `host`. The fetch ended `age` ms before now (the worker
-- measures it); the next one may start `delay` after that, where delay is
-- the host's delay raised by the adaptive terms:
--   fetch: ms the server took to answer (-1: no contact, nothing learnt);
--     the delay is at least factor x fetch, up to amax (Heritrix's rule);
--   throttled: the answer was 429/503, so the host's penalty `pen` doubles
--     (at least the delay, at least 1 s, at most bmax); any other answer
--     halves it, so the host recovers;
--   hold: ms the host asked to be left alone (Retry-After), or a robots.txt
--     retry backoff;
--   nocontact: the slot was released without any request to the host.
-- `r` may be nil: a plain release (no fetch measured).
local function release_slot(host, ddelay, dconc, age, r)
  r = r or {}
  local fetch = r.fetch or -1
  local hk = P .. 'h:' .. host
  local h = redis.call('HMGET', hk, 'inflight', 'next', 'delay', 'conc', 'rdelay', 'pen')
  local inflight = (tonumber(h[1]) or 1) - 1
  if inflight < 0 then inflight = 0 end
  local delay = host_delay(h[3], h[5], ddelay)
  local pen = tonumber(h[6]) or 0
  if fetch >= 0 then
    if r.throttled then
      pen = math.max(pen * 2, delay, 1000)
      if pen > (r.bmax or pen) then pen = r.bmax end
    else
      pen = math.floor(pen / 2)
      if pen < 100 then pen = 0 end
    end
    if pen > 0 then redis.call('HSET', hk, 'pen', pen) else redis.call('HDEL', hk, 'pen') end
  end
  local wait = delay
  if fetch > 0 and (r.factor or 0) > 0 then
    wait = math.max(wait, math.min(fetch * r.factor, r.amax or 0))
  end
  if pen > wait then wait = pen end
  if (r.hold or 0) > wait then wait = r.hold end
  local nxt = NOW - (age or 0) + wait
  local prev = tonumber(h[2]) or 0
  local conc = tonumber(h[4]) or dconc
  if r.nocontact and (r.hold or 0) == 0 and conc <= 1 then
    -- The host was not contacted (robots.txt forbade the URL): with one slot,
    -- it was ready when claimed, so it may be fetched now; the claim-time
    -- floor only guarded the fetch that did not happen.
    nxt = NOW
  elseif prev > nxt then
    nxt = prev
  end
  redis.call('HSET', hk, 'inflight', inflight, 'next', nxt)
  if inflight < conc and best_band(host) then schedule(host, nxt) end
end

-- A lease record is "<state>\t<worker>\t<host>\t<band>\t<item>", so the URL
-- goes back to its band; state f = fetching (holds the host slot), p =
-- processing (slot released, not yet acked).
local function lease_record(state, worker, host, band, item)
  return state .. '\t' .. worker .. '\t' .. host .. '\t' .. band .. '\t' .. item
end

local function parse_lease(v)
  local state, worker, host, band, item = string.match(v, '^(%a)\t([^\t]*)\t([^\t]*)\t(%d+)\t(.*)$')
  return state, worker, host, tonumber(band), item
end

-- Back to the head of its band. Returns 0 (and drops this copy) if the URL is
-- queued again already (credit mode: a dont_filter copy of it).
local function requeue(host, band, item)
  if CREDIT and redis.call('HEXISTS', P .. 'b:' .. host, string.sub(item, 1, 8)) == 1 then return 0 end
  queue_push(host, band, item, true)
  raise_due(host, band)
  return 1
end
