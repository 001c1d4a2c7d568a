-- host_config(P, host, delay_ms or "", conc or "")
-- Sets a host's own delay and concurrency (empty: back to the crawl default).
local hk = P .. 'h:' .. ARGV[2]
if ARGV[3] == '' then redis.call('HDEL', hk, 'delay') else redis.call('HSET', hk, 'delay', ARGV[3]) end
if ARGV[4] == '' then redis.call('HDEL', hk, 'conc') else redis.call('HSET', hk, 'conc', ARGV[4]) end
return 1
