-- add(P, default_delay_ms, default_conc, n, [host, bucket, fp, dont_filter, req] * n)
-- Seen test on the packed fingerprint bucket, then append to the host queue.
-- Returns {added, seen_hits}.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local FP_BYTES = 6
local added, hits = 0, 0

-- Fingerprints are packed back to back: a match only counts on a boundary.
local function contains(s, fp)
  local init = 1
  while true do
    local i = string.find(s, fp, init, true)
    if not i then return false end
    if (i - 1) % FP_BYTES == 0 then return true end
    init = i + 1
  end
end

for i = 0, n - 1 do
  local b = 5 + i * 5
  local host, bucket, fp, dont_filter, req = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
  local sk = P .. 'seen:' .. bucket
  local s = redis.call('GET', sk)
  local seen = s and contains(s, fp)
  if not seen then redis.call('APPEND', sk, fp) end
  if seen and dont_filter ~= '1' then
    hits = hits + 1
  else
    -- Only a queue that was empty can change the host's readiness: a
    -- non-empty one is already in `ready` or waits for a slot to be released.
    if redis.call('RPUSH', P .. 'q:' .. host, req) == 1 then
      make_ready(host, ddelay, dconc)
    end
    added = added + 1
  end
end
if added > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', added)
  redis.call('HINCRBY', P .. 'n', 'enqueued', added)
end
if hits > 0 then redis.call('HINCRBY', P .. 'n', 'seen_hits', hits) end
return {added, hits}
