-- trim_start_urls(expected_tail...) on KEYS[1] = "<crawl>:start_urls"
-- Removes the oldest entries only if they are still exactly the ones this
-- worker read and enqueued: two workers racing never drop an unread seed.
local n = #ARGV
local tail = redis.call('LRANGE', KEYS[1], -n, -1)
if #tail ~= n then return 0 end
for i = 1, n do
  if tail[i] ~= ARGV[i] then return 0 end
end
redis.call('LTRIM', KEYS[1], 0, -(n + 1))
return n
