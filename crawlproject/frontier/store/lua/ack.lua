-- ack(P, default_delay_ms, default_conc, mode, id...)
-- mode "done": the URL's outcome and its links are stored; forget the lease.
-- mode "moved": a redirect or retry of the URL is queued; forget the lease
--   (not counted as done: ``done`` counts finished URLs for max_pages).
-- mode "dead": like done, but the stored request goes to the `dead` list
--   (it could not be decoded), as "host \t request"; nothing is lost silently.
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
if #ARGV < 5 then return {0, 0, tonumber(call('HGET', P .. 'n', 'done')) or 0} end
-- Usually no URL of the shard was ever reclaimed: one EXISTS, no hashing.
local reclaims = mode ~= 'return' and call('EXISTS', P .. 'reclaims') == 1
local records = call('HMGET', P .. 'lease', unpack(ARGV, 5))
local gone, seen = {}, {}
for k, v in ipairs(records) do
  local id = ARGV[4 + k]
  if not v or seen[id] then
    missing = missing + 1
  else
    seen[id] = true
    gone[#gone + 1] = id
    -- The usual case, a URL done after its slot was released, needs no parsing.
    if mode ~= 'done' or reclaims or sub(v, 1, 1) == 'f' then
      local state, worker, host, band, item = parse_lease(v)
      if mode == 'return' then
        returned = returned + requeue(host, band, item)
      elseif mode == 'dead' then
        call('RPUSH', P .. 'dead', host .. '\t' .. item_request(item))
      end
      if reclaims then call('HDEL', P .. 'reclaims', reclaim_key(host, item)) end
      if state == 'f' then
        release_slot(host, ddelay, dconc)
      elseif mode == 'return' then
        make_ready(host, ddelay, dconc)
      end
    end
    acked = acked + 1
  end
end
if acked > 0 then
  call('HDEL', P .. 'lease', unpack(gone))
  call('ZREM', P .. 'leases', unpack(gone))
  call('HINCRBY', P .. 'n', 'leased', -acked)
  if returned > 0 then call('HINCRBY', P .. 'n', 'queued', returned) end
  if mode == 'done' then
    return {acked, missing, call('HINCRBY', P .. 'n', 'done', acked)}
  end
end
return {acked, missing, tonumber(call('HGET', P .. 'n', 'done')) or 0}
