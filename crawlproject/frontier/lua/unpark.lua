-- unpark(P, default_delay_ms, default_conc, max_n)
-- Puts up to max_n parked URLs (see park_host) back at the tail of their host
-- queues, and clears the hosts' parked flag, so an operator can undo a trap
-- verdict (`crawlproject parked --requeue`). Returns the number requeued
-- (call again while it is max_n).
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local max_n = tonumber(ARGV[4])
local n = 0
while n < max_n do
  local entry = redis.call('LPOP', P .. 'parked')
  if not entry then break end
  local tab = string.find(entry, '\t', 1, true)
  local host = string.sub(entry, 1, tab - 1)
  redis.call('HDEL', P .. 'h:' .. host, 'parked')
  if redis.call('RPUSH', P .. 'q:' .. host, string.sub(entry, tab + 1)) == 1 then
    make_ready(host, ddelay, dconc)
  end
  n = n + 1
end
if n > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', n)
  redis.call('HINCRBY', P .. 'n', 'unparked', n)
end
return n
