-- Shared by the scripts of an address's home shard (address_take, address_release,
-- address_renew; the keys are documented in crawlproject/frontier/store/keys.py).
-- KEYS[1] routes the call (a key of the shard), KEYS[2] is the shard's
-- `slotguard` (never written: Redis refuses the script while the slot
-- migrates, _prelude.lua); ARGV[1] is the shard prefix
-- "cp:{crawl/s~n}:" (the shard's tag: keys.py): every key below starts with
-- it, so a script touches one hash slot. Per address A: `al:A` places held (lease token -> expiry, ms),
-- `aq:A` hosts waiting for a place (host -> first asked, ms: first come first
-- served), `ar:A` places reserved for woken hosts (host -> reservation expiry),
-- `a:A` the address's own politeness in address mode (`next`, `pen`).
local P = ARGV[1]
local t = redis.call('TIME')
local NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- How long an address's own politeness (address mode) outlives its last use.
local KEEP_MS = 3600000

-- A place whose lease expired (its worker died or hung: the lease is reclaimed
-- on its host's shard at the same time) and a reservation not taken in time
-- are dropped: that is how they come back.
local function prune(addr)
  redis.call('ZREMRANGEBYSCORE', P .. 'al:' .. addr, '-inf', NOW)
  redis.call('ZREMRANGEBYSCORE', P .. 'ar:' .. addr, '-inf', NOW)
end

local function free_places(addr, cap)
  return cap - redis.call('ZCARD', P .. 'al:' .. addr) - redis.call('ZCARD', P .. 'ar:' .. addr)
end

-- Free places go to the hosts waiting longest, in order: each is reserved for
-- its host until `from` (the address's next start, or now) + reserve_ms, and
-- the host is woken (appended to `wakes` as host, ms from now; its worker runs
-- address_wake.lua on the host's shard). `asker`, asking now, is not woken.
local function wake_waiting(addr, cap, from, reserve_ms, wakes, asker)
  local free = free_places(addr, cap)
  if free <= 0 then return end
  local start = math.max(from, NOW)
  for _, host in ipairs(redis.call('ZRANGE', P .. 'aq:' .. addr, 0, free - 1)) do
    redis.call('ZREM', P .. 'aq:' .. addr, host)
    redis.call('ZADD', P .. 'ar:' .. addr, start + reserve_ms, host)
    if host ~= asker then
      wakes[#wakes + 1] = host
      wakes[#wakes + 1] = start - NOW
    end
  end
end

-- The shard's index of busy addresses, for `crawlproject status`: `afull`
-- (address -> places held) while it is at its cap, `aqd` (address -> hosts
-- waiting) while any wait.
local function index(addr, cap)
  local held = redis.call('ZCARD', P .. 'al:' .. addr)
  if held >= cap then
    redis.call('ZADD', P .. 'afull', held, addr)
  else
    redis.call('ZREM', P .. 'afull', addr)
  end
  local waiting = redis.call('ZCARD', P .. 'aq:' .. addr)
  if waiting > 0 then
    redis.call('ZADD', P .. 'aqd', waiting, addr)
  else
    redis.call('ZREM', P .. 'aqd', addr)
  end
end
