-- unpark(P, default_delay_ms, default_conc, max_n)
-- Puts up to max_n parked URLs (see park_host) back in their host queues, in
-- their bands, and clears the hosts' parked flag, so an operator can undo a
-- trap verdict (`crawlproject parked --requeue`). Returns the number
-- requeued (call again while it is max_n).
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local max_n = tonumber(ARGV[4])
local n, pushed = 0, 0
while n < max_n do
  local entry = redis.call('LPOP', P .. 'parked')
  if not entry then break end
  local host, band, item = string.match(entry, '^([^\t]*)\t(%d+)\t(.*)$')
  redis.call('HDEL', P .. 'h:' .. host, 'parked')
  if not (CREDIT and redis.call('HEXISTS', P .. 'b:' .. host, string.sub(item, 1, 8)) == 1) then
    if queue_push(host, tonumber(band), item) then make_ready(host, ddelay, dconc) else raise_due(host, tonumber(band)) end
    pushed = pushed + 1
  end
  n = n + 1
end
if pushed > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', pushed)
  redis.call('HINCRBY', P .. 'n', 'unparked', pushed)
end
return n
