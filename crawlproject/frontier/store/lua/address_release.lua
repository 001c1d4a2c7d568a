-- address_release(P, reserve_ms, delay_ms, factor, amax_ms, bmax_ms,
--                 then per place: lease token, address, cap, age_ms, fetch_ms, hold_ms, flags)
-- The fetch holding each place is over (its response came back age_ms ago, or
-- its lease ended unfetched): the place is freed and given to the host waiting
-- longest. In address mode (delay_ms >= 0) the address's next start is set as
-- release_slot (_prelude.lua) sets a host's: delay_ms after the response,
-- raised by factor x fetch_ms (up to amax_ms; fetch_ms the smaller of this
-- answer's time and the address's last one, `ft`, as release_slot does: one
-- slow answer is most often the worker's own stall), by the 429/503 penalty `pen`
-- (flags 1: throttled: it doubles, at least delay_ms and 1 s, at most
-- bmax_ms; any other answer halves it) and by hold_ms (Retry-After); flags 4:
-- no request reached the address with this place (its delay need not run).
-- Safe to run again: a place released already moves no penalty, answer
-- time nor another fetch's next start.
-- Returns wakes = {host, ms, ...} (see address_take.lua).
local reserve_ms = tonumber(ARGV[2])
local delay_ms = tonumber(ARGV[3])
local factor, amax, bmax = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local wakes = {}
for i = 7, #ARGV - 6, 7 do
  local token, addr, cap = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local fetch = tonumber(ARGV[i + 4]) or -1
  local flags = tonumber(ARGV[i + 6]) or 0
  -- Not held (released already: this call run again after its reply was
  -- lost; or expired): the next start still follows this answer, but its
  -- penalty and answer time are not counted a second time.
  local held = redis.call('ZREM', P .. 'al:' .. addr, token) == 1
  prune(addr)
  local nxt = 0
  if delay_ms >= 0 then
    local ak = P .. 'a:' .. addr
    -- Clamped as in release.lua: a bogus age cannot move the next start far back.
    local age = math.min(math.max(tonumber(ARGV[i + 3]) or 0, 0), delay_ms + 60000)
    local hold = math.min(math.max(tonumber(ARGV[i + 5]) or 0, 0), bmax)
    local a = redis.call('HMGET', ak, 'next', 'pen', 'ft')
    local pen = tonumber(a[2]) or 0
    if fetch >= 0 and held then
      if flags % 2 == 1 then
        pen = math.min(math.max(pen * 2, delay_ms, 1000), bmax)
      else
        pen = math.floor(pen / 2)
        if pen < 100 then pen = 0 end
      end
    end
    local wait = delay_ms
    local adaptive = fetch > 0 and factor > 0
    if adaptive then
      local last = tonumber(a[3])
      local basis = (last and last < fetch) and last or fetch
      wait = math.max(wait, math.min(basis * factor, amax))
    end
    if pen > wait then wait = pen end
    if hold > wait then wait = hold end
    nxt = NOW - age + wait
    local prev = tonumber(a[1]) or 0
    if flags % 8 >= 4 and hold == 0 and cap <= 1 then
      -- Nothing was sent with this place: nothing to wait for. A place not
      -- held any more may have been taken since: its start stands.
      nxt = held and NOW or math.max(prev, NOW)
    elseif prev > nxt then
      nxt = prev
    end
    if pen > 0 then
      redis.call('HSET', ak, 'next', nxt, 'pen', pen)
    else
      redis.call('HSET', ak, 'next', nxt)
      redis.call('HDEL', ak, 'pen')
    end
    if adaptive and held then redis.call('HSET', ak, 'ft', fetch) end
    redis.call('PEXPIRE', ak, math.max(nxt - NOW, 0) + pen + KEEP_MS)
  end
  wake_waiting(addr, cap, nxt, reserve_ms, wakes, nil)
  index(addr, cap)
end
if #wakes > 0 then redis.call('HINCRBY', P .. 'n', 'address_woken', #wakes / 2) end
return wakes
