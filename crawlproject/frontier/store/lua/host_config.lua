-- host_config(P, default_conc, host, field, value, field, value, ...)
-- Sets a host's own settings: `delay` (ms) and `conc` (CRAWL_HOST_OVERRIDES),
-- `rdelay` (ms, its robots.txt Crawl-delay). An empty value removes the
-- field (back to the crawl default).
local dconc = tonumber(ARGV[2])
local host = ARGV[3]
local hk = P .. 'h:' .. host
for i = 4, #ARGV - 1, 2 do
  local field = ARGV[i]
  if field ~= 'delay' and field ~= 'conc' and field ~= 'rdelay' then
    return redis.error_reply('unknown host field ' .. field)
  end
  if ARGV[i + 1] == '' then redis.call('HDEL', hk, field) else redis.call('HSET', hk, field, ARGV[i + 1]) end
end
-- More slots may make a waiting host ready now.
make_ready(host, 0, dconc)
return 1
