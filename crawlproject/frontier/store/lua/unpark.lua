-- unpark(P, default_delay_ms, default_conc, max_n, list)
-- Puts up to max_n URLs set aside in `list` back in their host queues, in
-- their bands, so an operator can undo a verdict: "parked" (a trap verdict,
-- see park_host; also clears the hosts' parked flag, contained token
-- shapes and reasons: `crawlproject parked
-- --requeue`) or "poison" (reclaimed CRAWL_MAX_RECLAIMS times, see reclaim;
-- `crawlproject poisoned --requeue` once the cause is fixed). Returns the
-- number taken off the list (call again while it is max_n).
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local max_n = tonumber(ARGV[4])
local list = ARGV[5]
if list ~= 'parked' and list ~= 'poison' then return redis.error_reply('unknown list ' .. tostring(list)) end
local n, pushed = 0, 0
while n < max_n do
  local entry = redis.call('LPOP', P .. list)
  if not entry then break end
  local host, band, item = string.match(entry, '^([^\t]*)\t(%d+)\t(.*)$')
  band = tonumber(band)
  if list == 'parked' then redis.call('HDEL', P .. 'h:' .. host, 'parked', 'ts') end
  pushed = pushed + queue_back(host, band, item, ddelay, dconc)
  n = n + 1
end
if pushed > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', pushed)
  redis.call('HINCRBY', P .. 'n', list == 'parked' and 'unparked' or 'unpoisoned', pushed)
end
-- Verdicts undone: the reasons go with the URLs (over-budget counts stay).
if list == 'parked' and redis.call('LLEN', P .. 'parked') == 0 then
  for _, f in ipairs(redis.call('HKEYS', P .. 'tr')) do
    if string.sub(f, -7) ~= '\tbudget' then redis.call('HDEL', P .. 'tr', f) end
  end
end
return n
