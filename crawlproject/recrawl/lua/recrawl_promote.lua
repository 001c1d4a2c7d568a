-- recrawl_promote(P, now_s, batch, max_queued, ddelay, dconc, all, callback, errback)
-- Moves up to `batch` URLs of the shard's recrawl schedule `rdue` whose due
-- time (unix s) is <= now_s (all = "1": whatever their due time) into their
-- host queues, as requests whose meta carries the URL's fetch state
-- (crawl_recrawl: the `fs:<host>` text, verbatim) and lets a 304 through to
-- the callback. Never past max_queued URLs queued in the shard.
-- A URL is in `rdue` or queued / in flight, never both: it leaves `rdue` here,
-- and the worker that fetches it puts it back with its next due time. So any
-- number of promoters may run at once: a URL is promoted once.
-- Returns {promoted, lost (schedule entries without a state, dropped),
--          due left (<= now_s), oldest due left (s; 0: none)}.
local now_s = tonumber(ARGV[2])
local batch = tonumber(ARGV[3])
local max_queued = tonumber(ARGV[4])
local ddelay = tonumber(ARGV[5])
local dconc = tonumber(ARGV[6])
local all = ARGV[7] == '1'
local callback = ARGV[8]
local errback = ARGV[9]
local RDUE = P .. 'rdue'
local FP_BYTES = 8
local NOT_MODIFIED = {304}

local function backlog()
  local left = redis.call('ZCOUNT', RDUE, '-inf', now_s)
  local oldest = 0
  if left > 0 then
    oldest = tonumber(redis.call('ZRANGE', RDUE, 0, 0, 'WITHSCORES')[2])
  end
  return left, oldest
end

local queued = tonumber(redis.call('HGET', P .. 'n', 'queued')) or 0
local room = math.min(batch, max_queued - queued)
if room <= 0 then
  local left, oldest = backlog()
  return {0, 0, left, oldest}
end
local members = redis.call('ZRANGEBYSCORE', RDUE, '-inf', all and '+inf' or now_s, 'LIMIT', 0, room)
local promoted, lost = 0, 0
local L = 0
if CREDIT then L = tonumber(redis.call('HGET', P .. 'aopic', 'L')) or 0 end
for _, m in ipairs(members) do
  redis.call('ZREM', RDUE, m)
  local fp = string.sub(m, 1, FP_BYTES)
  local host = string.sub(m, FP_BYTES + 1)
  local state = redis.call('HGET', P .. 'fs:' .. host, fp)
  if not state then
    lost = lost + 1
  else
    -- Fields: version, last, interval, fetches, changes, gone, digest,
    -- simhash, depth, etag, last_modified, url (url last: it ends the text).
    local fields, start = {}, 1
    for _ = 1, 11 do
      local tab = string.find(state, '\t', start, true)
      if not tab then break end
      fields[#fields + 1] = string.sub(state, start, tab - 1)
      start = tab + 1
    end
    if #fields < 11 then
      lost = lost + 1
    else
      local depth = tonumber(fields[9]) or 0
      local request = cjson.encode({
        url = string.sub(state, start),
        callback = callback,
        errback = errback,
        -- Known URLs all: a redirect hop must not be taken for a seen URL.
        dont_filter = true,
        meta = {depth = depth, crawl_recrawl = state, handle_httpstatus_list = NOT_MODIFIED},
      })
      local band = depth
      local item = request
      if CREDIT then
        -- A seed's credit: a page due again is worth fetching again.
        item = credit_item(fp, 1, L, request)
        band = band_of(1)
      else
        band = band_of(depth)
      end
      local hk = P .. 'h:' .. host
      local h = redis.call('HMGET', hk, 'parked', 'qb')
      if h[1] then
        redis.call('RPUSH', P .. 'parked', host .. '\t' .. band .. '\t' .. item)
        redis.call('HINCRBY', P .. 'n', 'parked', 1)
      else
        if queue_push(host, band, item, false, h[2] or false) then
          make_ready(host, ddelay, dconc, true)
        else
          raise_due(host, band)
        end
        promoted = promoted + 1
      end
    end
  end
end
if promoted > 0 then
  redis.call('HINCRBY', P .. 'n', 'queued', promoted)
  redis.call('HINCRBY', P .. 'n', 'enqueued', promoted)
  redis.call('HINCRBY', P .. 'n', 'recrawl_promoted', promoted)
end
if lost > 0 then redis.call('HINCRBY', P .. 'n', 'recrawl_lost', lost) end
local left, oldest = backlog()
return {promoted, lost, left, oldest}
