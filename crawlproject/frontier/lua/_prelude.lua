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

-- Frees one slot of `host`; the host may be fetched again `delay` after its
-- fetch ended, which was `age` ms before now (the worker measures it).
local function release_slot(host, ddelay, dconc, age)
  local hk = P .. 'h:' .. host
  local h = redis.call('HMGET', hk, 'inflight', 'next', 'delay', 'conc')
  local inflight = (tonumber(h[1]) or 1) - 1
  if inflight < 0 then inflight = 0 end
  local delay = tonumber(h[3]) or ddelay
  local nxt = NOW - (age or 0) + delay
  local prev = tonumber(h[2]) or 0
  if prev > nxt then nxt = prev end
  redis.call('HSET', hk, 'inflight', inflight, 'next', nxt)
  local conc = tonumber(h[4]) or dconc
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
