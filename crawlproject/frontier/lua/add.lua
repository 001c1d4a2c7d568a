-- add(P, default_delay_ms, default_conc, bucket_bits, host_cap, pattern_cap, entry...)
-- entry = fingerprint (8 bytes) .. kind (1 byte) .. pattern (8 bytes) .. pkey
--         .. "\t" .. number .. "\t" .. request
-- (one argument per URL: packing five costs the client 5x more).
-- kind: "0" new URL; "1" dont_filter (bypasses the seen test and the caps);
-- "c" credit only (a link seen before: no request, AOPIC credit for it).
-- number: score mode: the URL's priority score (its band: rounded, 0..31);
-- credit mode (AOPIC): credit to give the URL (see the prelude).
-- pattern: the URL's shape key (8 bytes; all zero: none), see rules/traps.py.
-- Seen test on the packed fingerprint bucket; then the per-host caps (0: off):
-- host_cap URLs per host per crawl (h:<host> `urls`), pattern_cap URLs per
-- shape per host (`pp:<host>`); then into the host queue (or to `parked`, for
-- a host set aside by park_host). Credit for a URL that is queued raises it;
-- credit for one already fetched (or refused) goes to the lambda cash.
-- Returns {added, seen_hits, host_capped, pattern_capped, credited,
--          hosts newly capped (\n-joined), hosts newly pattern-capped}:
-- a host is reported once per crawl per cap (flags `capped`, `pcapped`).
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local bucket_div = 2 ^ (24 - tonumber(ARGV[4]))
local host_cap = tonumber(ARGV[5]) or 0
local pattern_cap = tonumber(ARGV[6]) or 0
local FP_BYTES = 6
local NO_PATTERN = string.rep('\0', 8)
local added, hits, parked, capped, pcapped, credited = 0, 0, 0, 0, 0, 0
local cash = 0
local new_capped, new_pcapped = {}, {}
local L = 0
if CREDIT then L = tonumber(redis.call('HGET', P .. 'aopic', 'L')) or 0 end
local MIN_CREDIT = 1e-12  -- a queued URL's credit is positive (its band is defined)
local function credit_item(fp, credit, req)
  return fp .. string.format('%.17g', math.max(credit, MIN_CREDIT)) .. '\t'
    .. string.format('%.17g', L) .. '\t' .. req
end
local seq0 = tonumber(redis.call('GET', P .. 'qseq')) or 0
local seq = seq0
-- Per host, read once per call: links of one page share few hosts.
local hosts = {}  -- host -> {parked = bool, qb = band string or false}
local function host_state(host)
  local st = hosts[host]
  if not st then
    local h = redis.call('HMGET', P .. 'h:' .. host, 'parked', 'qb')
    st = {parked = h[1] ~= false, qb = h[2]}
    hosts[host] = st
  end
  return st
end

-- Queues an item; a host that had nothing queued may become ready, and a due
-- host whose best band improves moves up in `due` (its score there is always
-- its best band).
local function push(host, band, item, entry_only)
  local st = host_state(host)
  local best = st.qb and string.find(st.qb, '1', 1, true)
  local was_empty
  if entry_only then
    was_empty, st.qb = push_entry(host, band, item, false, st.qb)
  else
    was_empty, st.qb = queue_push(host, band, item, false, st.qb)
  end
  if was_empty then
    make_ready(host, ddelay, dconc)
  elseif best and band < best - 1 then
    raise_due(host, band)
  end
end

local function seq_bytes(n)
  local b = {}
  for i = 5, 1, -1 do
    b[i] = n % 256
    n = math.floor(n / 256)
  end
  return string.char(b[1], b[2], b[3], b[4], b[5])
end

-- Fingerprints are packed back to back: a match only counts on a boundary.
local function contains(s, fp)
  local init = 1
  while true do
    local i = string.find(s, fp, init, true)
    if not i then return false end
    if (i - 1) % FP_BYTES == 0 then return true end
    init = i + 1
  end
end

-- AOPIC credit for a known URL: raises it if queued, else feeds the lambda
-- cash; a URL whose band improves gets an entry in the better band. One call
-- for a queued URL: HINCRBYFLOAT creates the field of one that is not, and a
-- queued URL's credit is never below MIN_CREDIT, so c == credit tells them
-- apart (the field is then deleted again).
local function give_credit(host, fp, credit)
  if credit <= 0 then return end
  local bk = P .. 'b:' .. host
  local c = tonumber(redis.call('HINCRBYFLOAT', bk, fp .. '+', credit))
  if c - credit < MIN_CREDIT / 2 then
    redis.call('HDEL', bk, fp .. '+')
    cash = cash + credit
    return
  end
  local band = band_of(c)
  if band < band_of(c - credit) then push(host, band, fp, true) end
  credited = credited + 1
end

for i = 7, #ARGV do
  local e = ARGV[i]
  local kind = string.sub(e, 9, 9)
  local seen = false
  if kind ~= 'c' then
    local b1, b2, b3 = string.byte(e, 1, 3)
    local sk = P .. 'seen:' .. math.floor((b1 * 65536 + b2 * 256 + b3) / bucket_div)
    local short = string.sub(e, 3, 8)
    local s = redis.call('GET', sk)
    seen = s and contains(s, short)
    if not seen then redis.call('APPEND', sk, short) end
  end
  if seen and kind == '0' and not CREDIT then
    hits = hits + 1  -- the common case, parsed no further
  else
  local fp = string.sub(e, 1, 8)
  local tab = string.find(e, '\t', 18, true)
  local tab2 = string.find(e, '\t', tab + 1, true)
  local host = string.sub(e, 18, tab - 1)
  local number = tonumber(string.sub(e, tab + 1, tab2 - 1)) or 0
  if kind == 'c' then
    if CREDIT then give_credit(host, fp, number) end
  else
    local hk = P .. 'h:' .. host
    if seen and kind ~= '1' then
      hits = hits + 1
      give_credit(host, fp, number)
    elseif host_state(host).parked then
      local item = string.sub(e, tab2 + 1)
      if CREDIT then item = credit_item(fp, number, item) end
      redis.call('RPUSH', P .. 'parked', host .. '\t' .. band_of(math.max(number, MIN_CREDIT)) .. '\t' .. item)
      parked = parked + 1
    elseif kind == '0' and host_cap > 0 and redis.call('HINCRBY', hk, 'urls', 1) > host_cap then
      capped = capped + 1
      cash = cash + (CREDIT and number or 0)
      if redis.call('HSETNX', hk, 'capped', 1) == 1 then new_capped[#new_capped + 1] = host end
    elseif kind == '0' and pattern_cap > 0 and string.sub(e, 10, 17) ~= NO_PATTERN
        and redis.call('HINCRBY', P .. 'pp:' .. host, string.sub(e, 10, 17), 1) > pattern_cap then
      pcapped = pcapped + 1
      cash = cash + (CREDIT and number or 0)
      if redis.call('HSETNX', hk, 'pcapped', 1) == 1 then new_pcapped[#new_pcapped + 1] = host end
    else
      local band = band_of(number)
      local item = string.sub(e, tab2 + 1)
      if CREDIT then
        -- A URL not seen before cannot be queued; a dont_filter one may be:
        -- its second copy gets a key of its own (FF FF FF .. seq), which no
        -- 8-byte URL fingerprint is expected to take.
        if kind == '1' and redis.call('HEXISTS', P .. 'b:' .. host, fp) == 1 then
          seq = seq + 1
          fp = '\255\255\255' .. seq_bytes(seq)
        end
        band = band_of(math.max(number, MIN_CREDIT))
        item = credit_item(fp, number, item)
      end
      -- Only a queue that was empty can change the host's readiness: a
      -- non-empty one is in `ready`/`due` or waits for a slot to be released.
      push(host, band, item)
      added = added + 1
    end
  end
  end
end
if seq > seq0 then redis.call('SET', P .. 'qseq', seq) end
if added > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', added)
  redis.call('HINCRBY', P .. 'n', 'enqueued', added)
end
if hits > 0 then redis.call('HINCRBY', P .. 'n', 'seen_hits', hits) end
if parked > 0 then redis.call('HINCRBY', P .. 'n', 'parked', parked) end
if capped > 0 then redis.call('HINCRBY', P .. 'n', 'host_capped', capped) end
if pcapped > 0 then redis.call('HINCRBY', P .. 'n', 'pattern_capped', pcapped) end
if cash > 0 then redis.call('HINCRBYFLOAT', P .. 'aopic', 'cash', cash) end
return {added, hits, capped, pcapped, credited, table.concat(new_capped, '\n'), table.concat(new_pcapped, '\n')}
