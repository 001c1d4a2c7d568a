-- Shared helpers, prepended to every frontier script (see keys.py for the schema).
-- KEYS[1] is the shard's `ready` key (it routes the call on Redis Cluster);
-- ARGV[1] is the shard prefix "cp:{crawl/shard}:"; every key used below starts
-- with it, so one script only ever touches one hash slot.
local P = ARGV[1]
local t = redis.call('TIME')
local NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- A host enters `ready` when it has queued URLs and a free slot; its score is
-- the earliest time it may be fetched again.
local function make_ready(host, ddelay, dconc)
  local h = redis.call('HMGET', P .. 'h:' .. host, 'inflight', 'next', 'conc')
  local inflight = tonumber(h[1]) or 0
  local conc = tonumber(h[3]) or dconc
  if inflight < conc and redis.call('LLEN', P .. 'q:' .. host) > 0 then
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
  if inflight < conc and redis.call('LLEN', P .. 'q:' .. host) > 0 then
    redis.call('ZADD', P .. 'ready', nxt, host)
  end
end

-- A lease record is "<state>\t<worker>\t<host>\t<request json>"; state f =
-- fetching (holds the host slot), p = processing (slot released, not yet acked).
local function parse_lease(v)
  local state, worker, host, req = string.match(v, '^(%a)\t([^\t]*)\t([^\t]*)\t(.*)$')
  return state, worker, host, req
end
