-- host_config(P, host, delay_ms or "", conc or "", default_conc)
-- Sets a host's own delay and concurrency (empty: back to the crawl default).
local host = ARGV[2]
local hk = P .. 'h:' .. host
if ARGV[3] == '' then redis.call('HDEL', hk, 'delay') else redis.call('HSET', hk, 'delay', ARGV[3]) end
if ARGV[4] == '' then redis.call('HDEL', hk, 'conc') else redis.call('HSET', hk, 'conc', ARGV[4]) end
-- More slots may make a waiting host ready now.
make_ready(host, 0, tonumber(ARGV[5]))
return 1
