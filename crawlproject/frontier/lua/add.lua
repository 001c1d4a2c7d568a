-- add(P, default_delay_ms, default_conc, bucket_bits, entry...)
-- entry = fingerprint (8 bytes) .. dont_filter ("0"/"1") .. pkey .. "\t" .. request
-- (one argument per URL: packing five costs the client 5x more).
-- Seen test on the packed fingerprint bucket, then append to the host queue
-- (or to `parked`, for a host set aside by park_host).
-- Returns {added, seen_hits}.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local bucket_div = 2 ^ (24 - tonumber(ARGV[4]))
local FP_BYTES = 6
local added, hits, parked = 0, 0, 0

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

for i = 5, #ARGV do
  local e = ARGV[i]
  local b1, b2, b3 = string.byte(e, 1, 3)
  local bucket = math.floor((b1 * 65536 + b2 * 256 + b3) / bucket_div)
  local fp = string.sub(e, 3, 8)
  local dont_filter = string.sub(e, 9, 9)
  local tab = string.find(e, '\t', 10, true)
  local host = string.sub(e, 10, tab - 1)
  local sk = P .. 'seen:' .. bucket
  local s = redis.call('GET', sk)
  local seen = s and contains(s, fp)
  if not seen then redis.call('APPEND', sk, fp) end
  if seen and dont_filter ~= '1' then
    hits = hits + 1
  elseif redis.call('HEXISTS', P .. 'h:' .. host, 'parked') == 1 then
    redis.call('RPUSH', P .. 'parked', host .. '\t' .. string.sub(e, tab + 1))
    parked = parked + 1
  else
    -- Only a queue that was empty can change the host's readiness: a
    -- non-empty one is already in `ready` or waits for a slot to be released.
    if redis.call('RPUSH', P .. 'q:' .. host, string.sub(e, tab + 1)) == 1 then
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
if parked > 0 then redis.call('HINCRBY', P .. 'n', 'parked', parked) end
return {added, hits}
