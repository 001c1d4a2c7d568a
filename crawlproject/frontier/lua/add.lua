-- add(P, default_delay_ms, default_conc, seen_spec, host_cap, pattern_cap,
--     budget_base, budget_seed_votes, token_urls, token_repeat_permille, entry...)
-- entry = fingerprint (8 bytes) .. kind (1 byte) .. pattern (8 bytes)
--         .. token shape (8 bytes) .. vote (4 bytes) .. pkey
--         .. "\t" .. number .. "\t" .. request
-- (one argument per URL: packing five costs the client 5x more).
-- kind: "0" new URL; "1" dont_filter (bypasses the seen test and the caps);
-- "c" credit only (a link seen before: no request, AOPIC credit for it);
-- "v" vote only (a link seen before, from another registered domain).
-- number: score mode: the URL's priority score (its band: rounded, 0..31);
-- credit mode (AOPIC): credit to give the URL (see the prelude).
-- pattern: the URL's query shape key (8 bytes; all zero: none), see rules/traps.py.
-- token shape: the shape key of a URL with a token part (all zero: none).
-- vote: the linking page's registered domain (4 bytes of its hash) when it is
-- not the URL's own; all zero: none; FF FF FF FF: a seed (the operator's vote).
-- Seen test (seen_spec: the shard's seen set, _seen.lua); then, for a new URL:
-- a parked host's URLs go to `parked`; a token shape contained on the host
-- (`ts`) too; host_cap URLs per host per crawl (h:<host> `urls`); the host's
-- budget (budget_base x (1 + linking domains [+ seed votes])): over it, to the
-- host's overflow list `ob:<host>`, released as votes raise the budget;
-- pattern_cap URLs per shape per host (`pp:<host>`); then into the host
-- queue. Token shapes: `pp:<host>` counts, per shape, new URLs (field
-- "n" .. shape) and links seen before ("r" .. shape); a shape with token_urls
-- new URLs of which fewer than token_repeat_permille / 1000 repeat (its
-- tokens are minted per render: a session id in the path or query) is
-- contained: its URLs are parked from then on, fleet-wide.
-- Credit for a URL that is queued raises it; credit for one already fetched
-- (or refused) goes to the lambda cash.
-- Returns {added, seen_hits, host_capped, pattern_capped, credited,
--          hosts newly capped (\n-joined), hosts newly pattern-capped,
--          over budget, token-parked, hosts newly over budget,
--          "host \t shape hex" newly contained (\n-joined), released}:
-- a host is reported once per crawl per cap (flags `capped`, `pcapped`, `budgeted`).
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
seen_open(ARGV[4])
local host_cap = tonumber(ARGV[5]) or 0
local pattern_cap = tonumber(ARGV[6]) or 0
local budget_base = tonumber(ARGV[7]) or 0
local seed_votes = tonumber(ARGV[8]) or 0
local token_urls = tonumber(ARGV[9]) or 0
local token_permille = tonumber(ARGV[10]) or 0
local FIRST = 11
local PKEY_AT = 30
local MAX_VOTES = 256  -- linking domains counted; at this many a host has no budget
local MAX_TOKEN_SHAPES = 16  -- contained shapes per host; past it the host is parked
local NO_VOTE = string.rep('\0', 4)
local SEED_VOTE = string.rep('\255', 4)
local budgeted, tparked, released = 0, 0, 0
local new_budgeted, new_shapes = {}, {}
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
-- host -> {parked = bool, qb = band string or false, ts = contained token
-- shapes (8 bytes each) or false, seed = bool, votes = linking domains or nil}
local hosts = {}
local function host_state(host)
  local st = hosts[host]
  if not st then
    local h = redis.call('HMGET', P .. 'h:' .. host, 'parked', 'qb', 'ts', 'seed')
    st = {parked = h[1] ~= false, why = h[1], qb = h[2], ts = h[3], seed = h[4] ~= false}
    hosts[host] = st
  end
  return st
end

-- The host's page budget (URLs it may queue): budget_base for each vote, the
-- host's own included; nil: no budget (off, or MAX_VOTES domains link to it).
local function budget_of(host, st)
  if budget_base <= 0 then return nil end
  if not st.votes then st.votes = redis.call('SCARD', P .. 'il:' .. host) end
  if st.votes >= MAX_VOTES then return nil end
  return budget_base * (1 + st.votes + (st.seed and seed_votes or 0))
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
local function contains(s, fp, width)
  local init = 1
  while true do
    local i = string.find(s, fp, init, true)
    if not i then return false end
    if (i - 1) % width == 0 then return true end
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

-- A vote of another registered domain for the host: counted once per domain
-- (up to MAX_VOTES); a budget it raises lets over-budget URLs in, in order.
local function vote(host, v)
  if v == NO_VOTE then return end
  local st = host_state(host)
  local hk = P .. 'h:' .. host
  if v == SEED_VOTE then
    if not st.seed then
      st.seed = true
      redis.call('HSET', hk, 'seed', 1)
    end
  else
    if not st.votes then st.votes = redis.call('SCARD', P .. 'il:' .. host) end
    if st.votes >= MAX_VOTES then return end
    if redis.call('SADD', P .. 'il:' .. host, v) == 0 then return end
    st.votes = st.votes + 1
  end
  if budget_base <= 0 or st.parked then return end
  local ob = P .. 'ob:' .. host
  local budget = budget_of(host, st)
  local room = budget and budget - (tonumber(redis.call('HGET', hk, 'urls')) or 0)
  while room == nil or room > 0 do
    local e = redis.call('LPOP', ob)
    if not e then break end
    local tab = string.find(e, '\t', 1, true)
    push(host, tonumber(string.sub(e, 1, tab - 1)), string.sub(e, tab + 1))
    redis.call('HINCRBY', hk, 'urls', 1)
    added = added + 1
    released = released + 1
    if room then room = room - 1 end
    redis.call('HINCRBY', P .. 'tr', host .. '\tbudget', -1)
  end
end

-- Token shapes: count the URL (new) or the repeat (seen); contain a shape
-- whose tokens never repeat. Returns true if the shape is contained.
local function token_contained(host, shape, seen)
  local st = host_state(host)
  if st.ts and contains(st.ts, shape, 8) then return true end
  if token_urls <= 0 then return false end
  local pp = P .. 'pp:' .. host
  if seen then
    redis.call('HINCRBY', pp, 'r' .. shape, 1)
    return false
  end
  local n = redis.call('HINCRBY', pp, 'n' .. shape, 1)
  if n < token_urls then return false end
  local r = tonumber(redis.call('HGET', pp, 'r' .. shape)) or 0
  if r * 1000 >= n * token_permille then return false end
  st.ts = (st.ts or '') .. shape
  local hk = P .. 'h:' .. host
  if #st.ts > 8 * MAX_TOKEN_SHAPES then
    redis.call('HSET', hk, 'parked', 'token')  -- a host of endless token shapes
    st.parked, st.why = true, 'token'
  end
  redis.call('HSET', hk, 'ts', st.ts)
  redis.call('HINCRBY', P .. 'tr', host .. '\ttoken', 0)
  local hex = string.gsub(shape, '.', function(c) return string.format('%02x', string.byte(c)) end)
  new_shapes[#new_shapes + 1] = host .. '\t' .. hex
  return true
end

local function park(host, number, item, why)
  redis.call('RPUSH', P .. 'parked', host .. '\t' .. band_of(math.max(number, MIN_CREDIT)) .. '\t' .. item)
  redis.call('HINCRBY', P .. 'tr', host .. '\t' .. why, 1)
  parked = parked + 1
end

for i = FIRST, #ARGV do
  local e = ARGV[i]
  local kind = string.sub(e, 9, 9)
  local seen = false
  if kind == '0' or kind == '1' then
    seen = seen_test_and_add(e)  -- its first 8 bytes: the fingerprint
  end
  local tshape = string.sub(e, 18, 25)
  local v = string.sub(e, 26, 29)
  if seen and kind == '0' and not CREDIT and tshape == NO_PATTERN and v == NO_VOTE then
    hits = hits + 1  -- the common case, parsed no further
  else
  local fp = string.sub(e, 1, 8)
  local tab = string.find(e, '\t', PKEY_AT, true)
  local tab2 = string.find(e, '\t', tab + 1, true)
  local host = string.sub(e, PKEY_AT, tab - 1)
  local number = tonumber(string.sub(e, tab + 1, tab2 - 1)) or 0
  vote(host, v)
  if kind == 'c' then
    if CREDIT then give_credit(host, fp, number) end
  elseif kind == 'v' then
    if tshape ~= NO_PATTERN then token_contained(host, tshape, true) end
  else
    local hk = P .. 'h:' .. host
    local contained = kind == '0' and tshape ~= NO_PATTERN
      and token_contained(host, tshape, seen)
    if seen and kind ~= '1' then
      hits = hits + 1
      give_credit(host, fp, number)
    elseif host_state(host).parked then
      local item = string.sub(e, tab2 + 1)
      if CREDIT then item = credit_item(fp, number, item) end
      local why = host_state(host).why
      park(host, number, item, (why == '1' or not why) and 'parked' or why)
    elseif contained then
      local item = string.sub(e, tab2 + 1)
      if CREDIT then item = credit_item(fp, number, item) end
      park(host, number, item, 'token')
      tparked = tparked + 1
    else
      local n = (kind == '0' and (host_cap > 0 or budget_base > 0))
        and redis.call('HINCRBY', hk, 'urls', 1)
      local budget = n and budget_of(host, host_state(host))
      if n and host_cap > 0 and n > host_cap then
        capped = capped + 1
        cash = cash + (CREDIT and number or 0)
        if redis.call('HSETNX', hk, 'capped', 1) == 1 then new_capped[#new_capped + 1] = host end
      elseif budget and n > budget then
        -- Kept in order for when the host earns more votes (IRLbot's BEAST).
        redis.call('HINCRBY', hk, 'urls', -1)
        local item = string.sub(e, tab2 + 1)
        if CREDIT then item = credit_item(fp, number, item) end
        redis.call('RPUSH', P .. 'ob:' .. host, band_of(math.max(number, MIN_CREDIT)) .. '\t' .. item)
        budgeted = budgeted + 1
        redis.call('HINCRBY', P .. 'tr', host .. '\tbudget', 1)
        if redis.call('HSETNX', hk, 'budgeted', 1) == 1 then new_budgeted[#new_budgeted + 1] = host end
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
if budgeted > 0 then redis.call('HINCRBY', P .. 'n', 'over_budget', budgeted) end
if released > 0 then redis.call('HINCRBY', P .. 'n', 'budget_released', released) end
if tparked > 0 then redis.call('HINCRBY', P .. 'n', 'token_parked', tparked) end
if cash > 0 then redis.call('HINCRBYFLOAT', P .. 'aopic', 'cash', cash) end
seen_close()
return {added, hits, capped, pcapped, credited, table.concat(new_capped, '\n'),
  table.concat(new_pcapped, '\n'), budgeted, tparked, table.concat(new_budgeted, '\n'),
  table.concat(new_shapes, '\n'), released}
