-- Shared helpers, prepended to every frontier script: the parts it uses
-- (crawlproject/lua.py; a top-level statement at column 0 is a part). See
-- keys.py for the schema.
-- KEYS[1] is the shard's `ready` key (it routes the call on Redis Cluster),
-- KEYS[2] its `slotguard` key, never written: declared by every frontier
-- script so that, while the shard's slot migrates, Redis refuses the script
-- before it runs (the source misses a declared key: TRYAGAIN, or ASK; the
-- target misses one: TRYAGAIN), and never stops it midway at a key that has
-- moved ("non local key", after its first writes, which stay). The client
-- resends what was refused (crawlproject/frontier/connection/outage.py).
-- ARGV[1] is the shard prefix "cp:{crawl/s~n}:" (the shard's tag: keys.py);
-- every key used below starts with it, so one script only ever touches one
-- hash slot.
-- Written for Redis's CPU: a redis.call costs about as much as 50 lines of
-- Lua, one more field in an HMGET or HSET about half a call, and a number
-- turned into a string (a key, an argument) a third of a call: hot paths make
-- few calls, read and write few fields, reuse strings, and keep library
-- functions in locals (a global is a table lookup at every use).
local P = ARGV[1]
local call, tonumber, floor, frexp = redis.call, tonumber, math.floor, math.frexp
local sub, find, fmt = string.sub, string.find, string.format
local bit_and, bit_or, bit_not = bit.band, bit.bor, bit.bnot
local t = call('TIME')
local NOW = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
local NOW_S = fmt('%d', NOW)

-- Small numbers as strings (bands, due bands, slots in flight) without
-- formatting them: NUM[n] for 0 <= n <= 32.
local NUM = {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12',
  '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27',
  '28', '29', '30', '31', '32'}
local function int_s(n)
  return NUM[n] or fmt('%d', n)
end

-- A host's queue (the crawl's mode, `mode` key: score | credit):
--   score:  BANDS priority bands (Mercator's front queues, per host): LISTs
--           `q:<host>:<band>`, band 0 first, FIFO within a band, of requests
--           (codec.py's compact form, the URL relative to the host key);
--   credit: (AOPIC) one ZSET `q:<host>`: fingerprint -> credit received from
--           links, c, in units of MIN_CREDIT (an integer: Redis compares
--           integer scores of a small ZSET without parsing them); claims take
--           the highest first (equal credits in fingerprint order), and credit
--           for a queued URL is one ZADD XX INCR. `b:<host>` holds, while it is queued,
--           fingerprint -> Lq .. request (Lq: the shard's lambda offset L when
--           it was queued, an 8-byte big-endian double); its credit at claim is
--           c + L - Lq. Its band, band_of(c), orders the host among due hosts.
-- A host's `qb` (below) marks its non-empty bands: every one in score mode,
-- in credit mode the band of its best URL.
-- Functions below take and return an "item": the request (score mode) or
-- fingerprint .. c .. Lq .. request (credit mode: credit_item, c and Lq as
-- doubles).
local BANDS = 32
local CREDIT = call('GET', P .. 'mode') == 'credit'
local MIN_CREDIT = 1e-12  -- a queued URL's credit is positive (its band is defined)

-- A credit as a `q:<host>` score: an integer number of MIN_CREDIT, at least 1
-- (formatted as an integer up to 9e18 units: 9e6 credit).
local function units_s(c)
  local u = floor(c / MIN_CREDIT + 0.5)
  if u < 1 then u = 1 elseif u > 9e18 then u = 9e18 end
  return fmt('%d', u)
end
local LOG2 = math.log(2)

-- h:<host> `qb`: the host's non-empty bands and its place in due, one number
-- mask + 2^32 x d (mask: bit b = band b, the `bit` library's 32-bit integers;
-- d: due band + 1 while the host is due, else 0), missing (or 0, as claim
-- leaves a host it emptied) when both are 0.
local D_UNIT = 4294967296

local function split_qb(v)
  v = tonumber(v) or 0
  local d = floor(v / D_UNIT)
  return v - d * D_UNIT, d
end

-- The `qb` value of (mask, d) as a string; nil when both are 0 (no field).
local function qb_s(mask, d)
  if mask < 0 then mask = mask + D_UNIT end  -- bit 31 set: the bit library's sign
  if mask == 0 and d == 0 then return nil end
  if d == 0 and mask < 32 then return NUM[mask] end
  return fmt('%d', mask + d * D_UNIT)
end

local function band_bit(band)
  return bit.lshift(1, band)
end

-- The best (lowest) band of a mask, or nil for none.
local function first_band(mask)
  if mask == 0 then return nil end
  local low = bit_and(mask, -mask)  -- its lowest bit alone: 2^band
  if low < 0 then return 31 end
  local _, e = frexp(low)  -- 2^band = 0.5 x 2^(band + 1)
  return e - 1
end

local function with_band(mask, band, on)
  if on then return bit_or(mask, band_bit(band)) end
  return bit_and(mask, bit_not(band_bit(band)))
end

-- Band of a score (score mode: rounded, clamped) or of a credit c (credit
-- mode: half-octave steps, credit 1 in band 8, 16 and more in band 0).
local function band_of(x)
  local b
  if CREDIT then
    if x <= 0 then return BANDS - 1 end
    b = 8 - floor(2 * math.log(x) / LOG2 + 0.5)
  else
    b = floor(x + 0.5)
  end
  if b < 0 then return 0 end
  if b >= BANDS then return BANDS - 1 end
  return b
end

-- A credit-mode item (see above) and its parts.
local function credit_item(fp, c, lq, request)
  return fp .. struct.pack('>dd', c, lq) .. request
end

local function item_credit(item)  -- c, Lq
  return struct.unpack('>dd', item, 9)
end

-- The request inside an item.
local function item_request(item)
  if not CREDIT then return item end
  return sub(item, 25)
end

-- Hosts whose time has come wait in `due:<band>` (LISTs of host keys, band
-- = the host's best band when it got there, first due first; its `qb` says
-- d = band + 1). An entry whose band no longer matches d is stale (the host
-- moved to a better band, was claimed, or had to wait again) and is skipped.
-- `db` is a mask of the bands whose due list may hold entries. Hosts that
-- must still wait are in the `ready` ZSET, scored by the time they may be
-- fetched. A host is due, in `ready`, or neither (no URL queued, or no free
-- slot).
local DB  -- `db`, read at first use

local function due_bands()
  if not DB then DB = tonumber(call('GET', P .. 'db')) or 0 end
  return DB
end

local function set_due_bands(mask)
  DB = mask
  call('SET', P .. 'db', mask)
end

-- Appends the host to due band `band`; returns its d (band + 1), which the
-- caller stores in its `qb` (with its other fields, in one HSET).
local function enter_due(host, band)
  if call('RPUSH', P .. 'due:' .. NUM[band], host) == 1 then
    local db = due_bands()
    local b = band_bit(band)
    if bit_and(db, b) == 0 then set_due_bands(bit_or(db, b)) end
  end
  return band + 1
end

-- Writes the host's `qb` (mask, d).
local function write_qb(hk, mask, d)
  local v = qb_s(mask, d)
  if v then call('HSET', hk, 'qb', v) else call('HDEL', hk, 'qb') end
end

local function in_due(host)
  local _, d = split_qb(call('HGET', P .. 'h:' .. host, 'qb'))
  return d > 0
end

local function best_band(host)
  return first_band((split_qb(call('HGET', P .. 'h:' .. host, 'qb'))))
end

-- Whether `s`, keys of `width` bytes packed back to back (a host's contained
-- token shapes), holds `key`: a match only counts on a boundary.
local function contains(s, key, width)
  local init = 1
  while true do
    local i = find(s, key, init, true)
    if not i then return false end
    if (i - 1) % width == 0 then return true end
    init = i + 1
  end
end

-- A URL's field in `reclaims`: the first 8 bytes of the SHA-1 of its host
-- key and request, in hex (the request is the same bytes at every claim of
-- the URL, and its URL is relative to the host; score mode has no
-- fingerprint at hand); only reclaimed URLs ever get a field.
local function reclaim_key(host, item)
  return sub(redis.sha1hex(host .. '\t' .. item_request(item)), 1, 16)
end

-- A better URL (band `band`) reached a host; `qb`: its `qb` (nil: read
-- here). If it is due, it moves to that band's due list (the entry left
-- behind is stale). Returns its d now.
local function raise_due(host, band, qb)
  local hk = P .. 'h:' .. host
  if qb == nil then qb = call('HGET', hk, 'qb') end
  local mask, d = split_qb(qb)
  if d > 0 and band < d - 1 then
    d = enter_due(host, band)
    write_qb(hk, mask, d)
  end
  return d
end

-- Claimable from `nxt` (ms): a due host stays due unless it must now wait;
-- otherwise it joins `ready` (claim moves it to due when its time comes).
local function schedule(host, nxt)
  local hk = P .. 'h:' .. host
  local mask, d = split_qb(call('HGET', hk, 'qb'))
  if nxt > NOW then
    if d > 0 then write_qb(hk, mask, 0) end  -- its due entry goes stale
  elseif d > 0 then
    return
  end
  call('ZADD', P .. 'ready', nxt, host)
end

-- A host with queued URLs and a free slot is due once `next` has passed,
-- else in `ready` until then. `fresh`: its queue was empty until now, so it
-- is neither due nor in `ready` yet, and goes straight to due when it may be
-- fetched now; otherwise it may be in `ready` already and joins it (claim
-- moves it to due): ZADD NX keeps an earlier time.
local function make_ready(host, ddelay, dconc, fresh)
  local hk = P .. 'h:' .. host
  local h = call('HMGET', hk, 'inflight', 'next', 'conc', 'qb')
  local mask, d = split_qb(h[4])
  local band = first_band(mask)
  if not band or d > 0 then return end
  if (tonumber(h[1]) or 0) < (tonumber(h[3]) or dconc) then
    local nxt = tonumber(h[2]) or 0
    if nxt <= NOW and fresh then
      write_qb(hk, mask, enter_due(host, band))
    else
      if nxt < NOW then nxt = NOW end
      call('ZADD', P .. 'ready', 'NX', nxt, host)
    end
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
--     the delay is at least factor x fetch, up to amax (Heritrix's rule),
--     fetch being the smaller of this answer's time and the host's last one
--     (`ft`): a single slow answer is most often the worker's own stall (its
--     event loop, a GC pause, no CPU free), timed into the download, and no
--     reason to slow the host (it made 1 % of a delay-bound crawl's hosts
--     wait twice their delay); a server that stays slow raises the delay from
--     its second slow answer;
--   throttled: the answer was 429/503, so the host's penalty `pen` doubles
--     (at least the delay, at least 1 s, at most bmax); any other answer
--     halves it, so the host recovers;
--   hold: ms the host asked to be left alone (Retry-After), or a robots.txt
--     retry backoff;
--   nocontact: the slot was released without any request to the host.
-- `r` may be nil: a plain release (no fetch measured).
-- The host is then due (its time has come: straight to its due band) or in
-- `ready` (it must wait), if it has URLs queued.
local NO_TUNING = {}
local function release_slot(host, ddelay, dconc, age, r)
  r = r or NO_TUNING
  local fetch = r.fetch or -1
  local hold = r.hold or 0
  local hk = P .. 'h:' .. host
  local h = call('HMGET', hk, 'inflight', 'next', 'delay', 'conc', 'rdelay', 'pen', 'qb', 'ft')
  local held = tonumber(h[1]) or 1
  local inflight = held - 1
  if inflight < 0 then inflight = 0 end
  local delay = host_delay(h[3], h[5], ddelay)
  local pen = tonumber(h[6]) or 0
  local pen_field
  if fetch >= 0 then
    if r.throttled then
      pen = math.max(pen * 2, delay, 1000)
      if pen > (r.bmax or pen) then pen = r.bmax end
    else
      pen = floor(pen / 2)
      if pen < 100 then pen = 0 end
    end
    pen_field = pen
  end
  local wait = delay
  local ft_field
  if fetch > 0 and (r.factor or 0) > 0 then
    local last = tonumber(h[8])
    local basis = (last and last < fetch) and last or fetch
    wait = math.max(wait, math.min(basis * r.factor, r.amax or 0))
    ft_field = fetch
  end
  if pen > wait then wait = pen end
  if hold > wait then wait = hold end
  local nxt = NOW - (age or 0) + wait
  local prev = tonumber(h[2]) or 0
  local conc = tonumber(h[4]) or dconc
  if r.nocontact and hold == 0 and conc <= 1 then
    -- The host was not contacted (robots.txt forbade the URL): with one slot,
    -- it was ready when claimed, so it may be fetched now; the claim-time
    -- floor only guarded the fetch that did not happen.
    nxt = NOW
  elseif prev > nxt then
    nxt = prev
  end
  local mask, d = split_qb(h[7])
  local band = first_band(mask)
  local qb  -- its new `qb`, if it changes
  if band and inflight < conc then
    if nxt > NOW then
      if d > 0 then qb = qb_s(mask, 0) end  -- it must wait again: its due entry goes stale
      call('ZADD', P .. 'ready', nxt, host)
    elseif d == 0 then
      if held >= conc then
        -- It had no free slot, so it was neither due nor in `ready`.
        qb = qb_s(mask, enter_due(host, band))
      else
        call('ZADD', P .. 'ready', 'NX', nxt, host)
      end
    end
  end
  if pen_field == 0 then
    if h[6] then call('HDEL', hk, 'pen') end
    pen_field = nil
  end
  local nxt_s = nxt == NOW and NOW_S or fmt('%d', nxt)
  local fields = {'inflight', int_s(inflight), 'next', nxt_s}
  if pen_field then fields[#fields + 1] = 'pen'; fields[#fields + 1] = pen_field end
  if qb then fields[#fields + 1] = 'qb'; fields[#fields + 1] = qb end
  if ft_field then fields[#fields + 1] = 'ft'; fields[#fields + 1] = int_s(ft_field) end
  call('HSET', hk, unpack(fields))
end

-- A lease record is "<state>\t<worker>\t<host>\t<band>\t<item>", so the URL
-- goes back to its band; state f = fetching (holds the host slot), p =
-- processing (slot released, not yet acked).
local function lease_record(state, worker, host, band, item)
  return state .. '\t' .. worker .. '\t' .. host .. '\t' .. NUM[band] .. '\t' .. item
end

-- (Plain finds: a pattern walks the record a character at a time.)
local function parse_lease(v)
  local a = find(v, '\t', 3, true)
  local b = a and find(v, '\t', a + 1, true)
  local c = b and find(v, '\t', b + 1, true)
  local band = c and tonumber(sub(v, b + 1, c - 1))
  if not band or sub(v, 2, 2) ~= '\t' then return nil end  -- not a lease record
  return sub(v, 1, 1), sub(v, 3, a - 1), sub(v, a + 1, b - 1), band, sub(v, c + 1)
end

-- The token guard (add.lua): whether a token shape of a host, with `n` new
-- URLs (at least `token_urls`), holds ids minted per render, from what its
-- links and pages showed (`pp:<host>` fields, shape appended): `r` its links
-- to URLs seen before; `u` / `d` its pages judged new content / duplicates of
-- pages of their host, and `s` links of the shape found on pages of the shape
-- (middlewares/dedupe.py via frontier/admission/token_evidence.py). Ids linked again and
-- again are stable; so are ids whose pages are new content and that come from
-- other pages (listings). Minted: pages that copy their host's pages, or ids
-- carried from page to page of the shape (a session's); with no page judged
-- at all (a spider without dedupe), past TOKEN_UNJUDGED x `token_urls` URLs.
local TOKEN_UNJUDGED = 100
local function token_minted(pp, shape, n, token_urls, permille)
  local f = call('HMGET', pp, 'r' .. shape, 'u' .. shape, 'd' .. shape, 's' .. shape)
  local r, u = tonumber(f[1]) or 0, tonumber(f[2]) or 0
  local d, s = tonumber(f[3]) or 0, tonumber(f[4]) or 0
  if r * 1000 >= n * permille then return false end
  if d > u or s * 2 >= n then return true end
  return u == 0 and n >= token_urls * TOKEN_UNJUDGED
end
