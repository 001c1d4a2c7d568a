-- address_take(P, lease_ms, reserve_ms, block_ms, delay_ms,
--              then per claimed URL: lease token, host, address, cap)
-- Runs on the address's home shard, after claim.lua gave the URL its host slot
-- on the host's shard. The URL gets a place at its host's address when
--   * its host holds a reservation there (it was woken for a free place), or
--   * a place is free and no other host waits for one (first come, first
--     served: a host that finds the address full waits in `aq:A`);
-- and, in address mode (delay_ms >= 0: the politeness slot is the address),
-- when the address's delay has passed (`next` of `a:A`); before that the
-- place is reserved for the host until its time.
-- A place is held under the lease's token until the fetch ends
-- (address_release.lua) or the lease expires (lease_ms, renewed with the
-- lease by address_renew.lua).
-- Returns {verdicts, wakes}: verdicts = {wait_ms, ...} per URL, 0 = granted,
-- else how long its host should stay away (until its reserved place's time,
-- or block_ms: it is woken sooner when a place is its turn); wakes = {host,
-- ms, ...}: waiting hosts whose turn came (address_wake.lua).
-- Safe to run again: a token that holds its place already is granted again.
local lease_ms = tonumber(ARGV[2])
local reserve_ms = tonumber(ARGV[3])
local block_ms = tonumber(ARGV[4])
local delay_ms = tonumber(ARGV[5])
local verdicts, wakes = {}, {}
local taken, denied = 0, 0
for i = 6, #ARGV - 3, 4 do
  local token, host, addr, cap = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local ak = P .. 'a:' .. addr
  prune(addr)
  if redis.call('ZSCORE', P .. 'al:' .. addr, token) then
    -- Its place is held already: this call run again after its reply was
    -- lost. Granted again, nothing taken, counted or delayed twice.
    verdicts[#verdicts + 1] = 0
  else
    local nxt = 0
    if delay_ms >= 0 then nxt = tonumber(redis.call('HGET', ak, 'next')) or 0 end
    wake_waiting(addr, cap, nxt, reserve_ms, wakes, host)
    local wait = 0
    if redis.call('ZSCORE', P .. 'ar:' .. addr, host) or free_places(addr, cap) > 0 then
      if nxt <= NOW then
        redis.call('ZREM', P .. 'ar:' .. addr, host)
        redis.call('ZADD', P .. 'al:' .. addr, NOW + lease_ms, token)
        if delay_ms >= 0 then
          -- With several places, starts are still delay_ms apart (as per host).
          redis.call('HSET', ak, 'next', NOW + delay_ms)
          redis.call('PEXPIRE', ak, delay_ms + KEEP_MS)
        end
      else
        -- In its delay: the place waits for this host until its time.
        redis.call('ZADD', P .. 'ar:' .. addr, nxt + reserve_ms, host)
        wait = nxt - NOW
      end
    else
      redis.call('ZADD', P .. 'aq:' .. addr, 'NX', NOW, host)
      wait = block_ms
    end
    if wait == 0 then taken = taken + 1 else denied = denied + 1 end
    verdicts[#verdicts + 1] = wait
    index(addr, cap)
  end
end
if taken > 0 then redis.call('HINCRBY', P .. 'n', 'address_taken', taken) end
if denied > 0 then redis.call('HINCRBY', P .. 'n', 'address_denied', denied) end
if #wakes > 0 then redis.call('HINCRBY', P .. 'n', 'address_woken', #wakes / 2) end
return {verdicts, wakes}
