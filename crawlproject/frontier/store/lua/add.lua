-- add(P, default_delay_ms, default_conc, seen_spec, host_cap, pattern_cap,
--     budget_base, budget_seed_votes, token_urls, token_repeat_permille,
--     then per host: pkey, n, its n entries ...)
-- entry = fingerprint (8 bytes) .. kind (1 byte) .. options (1 byte)
--         .. member length (1 byte) .. member
--         [.. pattern (8 bytes)] [.. token shape (8 bytes)] [.. vote (4 bytes)]
--         .. number (8-byte big-endian double) .. request
-- (one argument per URL: packing five costs the client 5x more; one host key
-- per host: its state is read once, its new URLs pushed in one call per band).
-- kind: "0" new URL; "1" dont_filter (bypasses the seen test and the caps);
-- "c" credit only (a link seen before: no request, AOPIC credit for it);
-- "v" vote only (a link seen before, from another registered domain).
-- options: "@" + 1 if a pattern follows, + 2 a token shape, + 4 a vote.
-- member: the fingerprint as the exact seen set stores it, in decimal (the
-- worker formats it: _seen.lua); empty for kinds "c" and "v".
-- number: score mode: the URL's priority score (its band: rounded, 0..31);
-- credit mode (AOPIC): credit to give the URL (see the prelude).
-- pattern: the URL's query shape key (8 bytes), see rules/traps.py.
-- token shape: the shape key of a URL with a token part.
-- vote: the linking page's registered domain (4 bytes of its hash) when it is
-- not the URL's own; the operator's: FF FF FF FF a seed, FE FF FF FF a host
-- of the crawl's scope (link_votes.py).
-- request: its stored form (codec.py: compact, the URL relative to the pkey).
-- Seen test (seen_spec: the shard's seen set, _seen.lua); then, for a new URL:
-- a parked host's URLs go to `parked`; a token shape contained on the host
-- (`ts`) too; host_cap URLs per host per crawl (h:<host> `urls`); the host's
-- budget (_budget.lua's host_budget; the operator's hosts have none): over
-- it, to its overflow list `ob:<host>`, released as votes raise the budget;
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
local MAX_TOKEN_SHAPES = 16  -- contained shapes per host; past it the host is parked
local NO_VOTE = string.rep('\0', 4)
local SEED_VOTE = string.rep('\255', 4)
local SCOPE_VOTE = '\254' .. string.rep('\255', 3)  -- a host of the crawl's scope
local budgeted, tparked, released = 0, 0, 0
local new_budgeted, new_shapes = {}, {}
local NO_PATTERN = string.rep('\0', 8)
local added, hits, parked, capped, pcapped, credited = 0, 0, 0, 0, 0, 0
local cash = 0
local new_capped, new_pcapped = {}, {}
local L = 0
if CREDIT then L = tonumber(call('HGET', P .. 'aopic', 'L')) or 0 end
local function new_item(fp, credit, req)
  return credit_item(fp, math.max(credit, MIN_CREDIT), L, req)
end
local seq0 = tonumber(call('GET', P .. 'qseq')) or 0
local seq = seq0
-- Per host, read once per call: links of one page share few hosts.
-- host -> {parked = bool, why, qb = band mask (as read), d = its due band + 1, hk = its h: key,
-- pend = band -> entries to push (or false), mask = bands pushed to; read when first
-- needed: ts = contained token shapes (8 bytes each) or false, seed, scoped = bool,
-- votes = linking domains}
local hosts = {}
local function host_state(host)
  local st = hosts[host]
  if not st then
    local hk = P .. 'h:' .. host
    local h = CREDIT and call('HMGET', hk, 'parked', 'qb')
      or call('HMGET', hk, 'parked', 'qb', 'qc')  -- qc: score mode's
    local mask, d = split_qb(h[2])
    st = {parked = h[1] ~= false, why = h[1], qb = mask, d = d, pend = false, mask = 0, qc = h[3],
      hk = hk}
    hosts[host] = st
  end
  return st
end

-- The host's state with its trap fields (token shapes, seed and scope flags).
local function host_traps(host)
  local st = host_state(host)
  if st.seed == nil then
    local h = call('HMGET', st.hk, 'ts', 'seed', 'scoped')
    st.ts, st.seed, st.scoped = h[1], h[2] ~= false, h[3] ~= false
  end
  return st
end

-- The host's page budget (_budget.lua's host_budget); nil: none.
local function budget_of(host, st)
  if budget_base <= 0 then return nil end
  host_traps(host)
  local budget
  budget, st.votes = host_budget(host, budget_base, seed_votes, st.seed or st.scoped, st.votes)
  return budget
end

-- Queues an item. Score mode: its request goes to the host's pending
-- entries, pushed in order, one RPUSH per band, when its group ends (flush).
-- Credit mode: its body and credit are stored at once (a credit later in the
-- same call must find it queued); flush updates the host's state.
local function push(host, band, item)
  local st = host_state(host)
  if CREDIT then
    st.mask = bit_or(st.mask, band_bit(band))
    local fp = sub(item, 1, 8)
    local c, lq = item_credit(item)
    call('HSET', P .. 'b:' .. host, fp, struct.pack('>d', lq) .. sub(item, 25))
    call('ZADD', P .. 'q:' .. host, units_s(c), fp)
    return
  end
  local pend = st.pend
  if not pend then  -- made at the host's first URL: most hosts of a call get one
    pend = {}
    st.pend = pend
  end
  local list = pend[band]
  if not list then
    list = {}
    pend[band] = list
    st.mask = bit_or(st.mask, band_bit(band))  -- once per band and call, not per URL
  end
  list[#list + 1] = item
end

-- A credit as a score; the links of one page bring the same credit.
local last_credit, last_units
local function units_of(credit)
  if credit ~= last_credit then last_credit, last_units = credit, units_s(credit) end
  return last_units
end

-- A new URL in credit mode: its body (L now) and credit.
local L_PACKED = struct.pack('>d', L)
local function push_new_credit(host, fp, credit, req)
  local st = host_state(host)
  credit = math.max(credit, MIN_CREDIT)
  st.mask = bit_or(st.mask, band_bit(band_of(credit)))
  call('HSET', P .. 'b:' .. host, fp, L_PACKED .. req)
  call('ZADD', P .. 'q:' .. host, units_of(credit), fp)
end

-- Pushes the host's pending entries; a host that had nothing queued becomes
-- due (or ready, if it must wait), and a due host whose best band improves
-- moves up (its due band is always its best band).
local function flush(host)
  local st = hosts[host]
  if not st or st.mask == 0 then return end
  local old = st.qb
  local qb
  if CREDIT then
    -- Its mask marks the band of its best URL only.
    local was, now = first_band(old), first_band(st.mask)
    qb = (was and was <= now) and old or band_bit(now)
  else
    -- A small host's URLs go to its one list (_queue.lua), others to band lists.
    local placed, small = false, false
    if old == 0 or st.qc then placed, small = compact_add(host, old, st.qc, st.pend, false) end
    st.qc = small and '1' or false
    if not placed then push_bands(host, st.pend) end
    st.pend = false
    qb = bit_or(old, st.mask)
  end
  st.mask = 0
  local hk = st.hk
  if old == 0 then
    -- It had nothing queued: neither due nor in `ready` (see the prelude).
    local h = call('HMGET', hk, 'inflight', 'next', 'conc')
    if (tonumber(h[1]) or 0) < (tonumber(h[3]) or dconc) then
      local nxt = tonumber(h[2]) or 0
      if nxt <= NOW then
        st.d = enter_due(host, first_band(qb))
      else
        call('ZADD', P .. 'ready', 'NX', nxt, host)
      end
    end
    call('HSET', hk, 'qb', qb_s(qb, st.d))
  elseif qb ~= old then
    local best = first_band(qb)
    if st.d > 0 and best < st.d - 1 then st.d = enter_due(host, best) end
    call('HSET', hk, 'qb', qb_s(qb, st.d))
  end
  st.qb = qb
end

-- AOPIC credit for a known URL: raises it if queued (ZADD XX: a URL not
-- queued is not added), else feeds the lambda cash; a URL whose band beats
-- its host's best makes it the host's (flush: the host moves up if due).
local function give_credit(host, fp, credit)
  if credit <= 0 then return end
  local c = call('ZADD', P .. 'q:' .. host, 'XX', 'INCR', units_of(credit), fp)
  if not c then
    cash = cash + credit
    return
  end
  credited = credited + 1
  c = tonumber(c) * MIN_CREDIT
  local band = band_of(c)
  if band == band_of(c - credit) then return end  -- no better than before: nor than its host's best
  local st = host_state(host)
  local best = first_band(st.qb)
  if not best or band < best then st.mask = bit_or(st.mask, band_bit(band)) end
end

-- A vote of another registered domain for the host: counted once per domain
-- (up to MAX_VOTES); or the operator's (no budget then). A budget it raises
-- lets over-budget URLs in, in order.
local function vote(host, v)
  local st = host_traps(host)
  local hk = st.hk
  if v == SEED_VOTE or v == SCOPE_VOTE then
    -- The operator's: a seed, or a host of the crawl's scope (the worker's verdict).
    local flag = v == SEED_VOTE and 'seed' or 'scoped'
    if not st[flag] then
      st[flag] = true
      redis.call('HSET', hk, flag, 1)
    end
  else
    if not st.votes then st.votes = redis.call('SCARD', P .. 'il:' .. host) end
    if st.votes >= MAX_VOTES then return end
    if redis.call('SADD', P .. 'il:' .. host, v) == 0 then return end
    st.votes = st.votes + 1
  end
  if budget_base <= 0 or st.parked then return end
  local out = take_over_budget(host, hk, budget_of(host, st))
  for _, it in ipairs(out) do push(host, it[1], it[2]) end
  added, released = added + #out, released + #out
end

-- Token shapes: count the URL (new) or the repeat (seen); contain a shape
-- whose tokens never repeat. Returns true if the shape is contained.
local function token_contained(host, shape, seen)
  local st = host_traps(host)
  if st.ts and contains(st.ts, shape, 8) then return true end
  if token_urls <= 0 then return false end
  local pp = P .. 'pp:' .. host
  if seen then
    redis.call('HINCRBY', pp, 'r' .. shape, 1)
    return false
  end
  local n = redis.call('HINCRBY', pp, 'n' .. shape, 1)
  if n < token_urls then return false end
  if not token_minted(pp, shape, n, token_urls, token_permille) then return false end
  st.ts = (st.ts or '') .. shape
  local hk = st.hk
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

local K_NEW, K_DONT_FILTER = byte('0'), byte('1')

local function park(host, number, item, why)
  redis.call('RPUSH', P .. 'parked', host .. '\t' .. band_of(math.max(number, MIN_CREDIT)) .. '\t' .. item)
  redis.call('HINCRBY', P .. 'tr', host .. '\t' .. why, 1)
  parked = parked + 1
end

-- One URL of `host`; `e` its entry.
local function add_one(host, e)
  local k, opt, ml = byte(e, 9, 11)  -- kind, options, member length: no string made
  local seen = false
  if k == K_NEW or k == K_DONT_FILTER then
    seen = seen_test_and_add(e, sub(e, 12, 11 + ml))  -- its first 8 bytes: the fingerprint
  end
  opt = opt - 64
  if seen and k == K_NEW and opt <= 1 then
    -- The common case (no token shape, no vote), parsed no further; credit
    -- mode reads only what give_credit needs (the number follows the
    -- member and, with opt 1, the 8-byte pattern).
    hits = hits + 1
    if CREDIT then give_credit(host, sub(e, 1, 8), (struct.unpack('>d', e, 12 + ml + 8 * opt))) end
    return
  end
  local kind = sub(e, 9, 9)
  local pos = 12 + ml
  local pattern, tshape, v = NO_PATTERN, NO_PATTERN, NO_VOTE
  if opt % 2 == 1 then
    pattern = sub(e, pos, pos + 7)
    pos = pos + 8
  end
  if opt % 4 >= 2 then
    tshape = sub(e, pos, pos + 7)
    pos = pos + 8
  end
  if opt >= 4 then
    v = sub(e, pos, pos + 3)
    pos = pos + 4
  end
  local fp = (CREDIT or kind ~= '0') and sub(e, 1, 8)
  local number = struct.unpack('>d', e, pos)
  local tab = pos + 7  -- the request starts after it
  if v ~= NO_VOTE then vote(host, v) end
  if kind == 'c' then
    if CREDIT then give_credit(host, fp, number) end
    return
  elseif kind == 'v' then
    if tshape ~= NO_PATTERN then token_contained(host, tshape, true) end
    return
  end
  local contained = kind == '0' and tshape ~= NO_PATTERN and token_contained(host, tshape, seen)
  if seen and kind ~= '1' then
    hits = hits + 1
    if CREDIT then give_credit(host, fp, number) end
    return
  end
  local st = host_state(host)
  if st.parked then
    local item = sub(e, tab + 1)
    if CREDIT then item = new_item(fp, number, item) end
    park(host, number, item, (st.why == '1' or not st.why) and 'parked' or st.why)
    return
  elseif contained then
    local item = sub(e, tab + 1)
    if CREDIT then item = new_item(fp, number, item) end
    park(host, number, item, 'token')
    tparked = tparked + 1
    return
  end
  local hk = st.hk
  local n = (kind == '0' and (host_cap > 0 or budget_base > 0))
    and redis.call('HINCRBY', hk, 'urls', 1)
  local budget = n and budget_of(host, st)
  if n and host_cap > 0 and n > host_cap then
    capped = capped + 1
    cash = cash + (CREDIT and number or 0)
    if redis.call('HSETNX', hk, 'capped', 1) == 1 then new_capped[#new_capped + 1] = host end
  elseif budget and n > budget then
    -- Kept in order for when the host earns more votes (IRLbot's BEAST).
    local item = sub(e, tab + 1)
    if CREDIT then item = new_item(fp, number, item) end
    budgeted = budgeted + 1
    if hold_over_budget(host, hk, band_of(math.max(number, MIN_CREDIT)), item) then
      new_budgeted[#new_budgeted + 1] = host
    end
  elseif kind == '0' and pattern_cap > 0 and pattern ~= NO_PATTERN
      and redis.call('HINCRBY', P .. 'pp:' .. host, pattern, 1) > pattern_cap then
    pcapped = pcapped + 1
    cash = cash + (CREDIT and number or 0)
    if redis.call('HSETNX', hk, 'pcapped', 1) == 1 then new_pcapped[#new_pcapped + 1] = host end
  else
    if CREDIT then
      -- A URL not seen before cannot be queued; a dont_filter one may be:
      -- its second copy gets a key of its own (FF FF FF .. seq), which no
      -- 8-byte URL fingerprint is expected to take.
      if kind == '1' and redis.call('HEXISTS', P .. 'b:' .. host, fp) == 1 then
        seq = seq + 1
        fp = '\255\255\255' .. struct.pack('>I5', seq)
      end
      push_new_credit(host, fp, number, sub(e, tab + 1))
    else
      push(host, band_of(number), sub(e, tab + 1))
    end
    added = added + 1
  end
end

local i, nargs = FIRST, #ARGV
while i <= nargs do
  local host = ARGV[i]
  local last = i + 1 + tonumber(ARGV[i + 1])
  for j = i + 2, last do add_one(host, ARGV[j]) end
  flush(host)
  i = last + 1
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
