-- ack(P, default_delay_ms, default_conc, mode, id...)
-- mode "done": the URL's outcome and its links are stored; forget the lease.
-- mode "moved": a redirect or retry of the URL is queued; forget the lease
--   (not counted as done: ``done`` counts finished URLs for max_pages).
-- mode "dead": like done, but the stored request goes to the `dead` list
--   (it could not be decoded); nothing is lost silently.
-- mode "return": put the URL back at the head of its band (a worker
--   that stops hands back what it has not finished).
-- A lease still in state f also frees its host slot. A URL that leaves for
-- good (every mode but return) drops its count in `reclaims`, if any.
-- Returns {acked, missing, done}: missing leases were already reclaimed; done is
-- the shard's count of finished URLs (for max_pages).
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local mode = ARGV[4]
local acked, missing, returned = 0, 0, 0
-- Usually no URL of the shard was ever reclaimed: one EXISTS, no hashing.
local reclaims = mode ~= 'return' and redis.call('EXISTS', P .. 'reclaims') == 1
for i = 5, #ARGV do
  local id = ARGV[i]
  local v = redis.call('HGET', P .. 'lease', id)
  if not v then
    missing = missing + 1
  else
    local state, worker, host, band, item = parse_lease(v)
    redis.call('HDEL', P .. 'lease', id)
    redis.call('ZREM', P .. 'leases', id)
    if mode == 'return' then
      returned = returned + requeue(host, band, item)
    elseif mode == 'dead' then
      redis.call('RPUSH', P .. 'dead', item_request(item))
    end
    if reclaims then redis.call('HDEL', P .. 'reclaims', reclaim_key(item)) end
    if state == 'f' then
      release_slot(host, ddelay, dconc)
    elseif mode == 'return' then
      make_ready(host, ddelay, dconc)
    end
    acked = acked + 1
  end
end
if acked > 0 then
  redis.call('HINCRBY', P .. 'n', 'leased', -acked)
  if returned > 0 then redis.call('HINCRBY', P .. 'n', 'queued', returned) end
  if mode == 'done' then redis.call('HINCRBY', P .. 'n', 'done', acked) end
end
return {acked, missing, tonumber(redis.call('HGET', P .. 'n', 'done')) or 0}
