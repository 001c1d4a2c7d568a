-- Host queues, after _prelude.lua (whose names it uses): pushing and popping
-- a host's URLs in either mode and either form of a score-mode queue (band
-- lists, or one list for a small host), and putting a URL back. Prepended,
-- like the prelude, part by part to the scripts that use it
-- (crawlproject/lua.py). See keys.py for the schema.

-- Score mode, a small host: while it has at most COMPACT_MAX entries, one
-- LIST `q:<host>` holds its whole queue, and its h:<host> `qc` is 1. A list
-- key costs Redis ~180 B before its first entry: a list per band would cost a
-- small host that much for each band it has URLs in. The list is the bands'
-- segments in band order, each FIFO; every segment but the first starts with
-- its band's marker, the band in decimal ("0".."31": a list's listpack keeps
-- it as a small integer, 2 bytes; a stored request starts with its tag byte,
-- 0x40-0x77, or "{": never a digit), so that a URL goes to the end of its band
-- with one LINSERT before the next band's marker, whatever the list holds.
-- Versions before 2026-12-08 wrote byte 255 then the band as one byte (4
-- bytes in a listpack): still read, and found as a pivot, so a list of a
-- running crawl they wrote goes on. The first segment's band is the first
-- band of the host's `qb` mask. A host with nothing queued starts small; past
-- COMPACT_MAX entries (markers included) it turns to band lists (`qc`
-- deleted) until it is empty again.
local COMPACT_MAX = 32
local OLD_MARK = 255
local str_byte, str_char = string.byte, string.char
local OLD_MARKERS = {}

local function marker(band)
  return NUM[band]
end

local function old_marker(band)
  local m = OLD_MARKERS[band]
  if not m then
    m = str_char(OLD_MARK, band)
    OLD_MARKERS[band] = m
  end
  return m
end

-- The band a list entry marks, or nil for a request.
local function marker_band(e)
  local b = str_byte(e, 1)
  if b == OLD_MARK then return str_byte(e, 2) end
  if b and b < 64 then return tonumber(e) end
  return nil
end

-- LINSERT `value` next to the marker of `band` (this version's, else the
-- older one): LINSERT's reply (-1: neither is there) and the marker found.
local function insert_by_marker(key, where, band, value)
  local m = marker(band)
  local n = call('LINSERT', key, where, m, value)
  if n < 0 then
    m = old_marker(band)
    n = call('LINSERT', key, where, m, value)
  end
  return n, m
end

-- The first band of `mask` after `band`, or nil.
local function band_after(mask, band)
  if band >= BANDS - 1 then return nil end
  return first_band(bit_and(mask, bit.lshift(-1, band + 1)))
end

-- Pushes a host's items to its band lists: `by` band -> its items, in order.
local function push_bands(host, by)
  local qk = P .. 'q:' .. host .. ':'
  for band, list in pairs(by) do
    local key = qk .. NUM[band]
    for i = 1, #list, 1000 do  -- Lua's unpack has a stack limit
      call('RPUSH', key, unpack(list, i, math.min(i + 999, #list)))
    end
  end
end

-- A small host's list (its bands `mask`) goes to band lists: it is no longer small.
local function compact_split(host, key, mask)
  local by = {}
  local band = first_band(mask)
  for _, e in ipairs(call('LRANGE', key, 0, -1)) do
    local mb = marker_band(e)
    if mb then
      band = mb
    else
      local list = by[band]
      if not list then
        list = {}
        by[band] = list
      end
      list[#list + 1] = e
    end
  end
  call('DEL', key)
  push_bands(host, by)
  call('HDEL', P .. 'h:' .. host, 'qc')
end

-- Puts items of one band `band` in a small host's list,
-- `mask` its bands before: at the end of their band (front: one entry, at its
-- head). Returns the list's length and the new mask.
local function compact_put(key, mask, band, entries, front)
  local first = first_band(mask)
  local n
  if not first then
    n = call('RPUSH', key, unpack(entries))
  elseif band < first then
    -- The new first band: the old one gets its marker.
    local args = {marker(first)}
    for i = #entries, 1, -1 do args[#args + 1] = entries[i] end
    n = call('LPUSH', key, unpack(args))
  elseif front and band == first then
    n = call('LPUSH', key, entries[1])
  elseif front and bit_and(mask, band_bit(band)) ~= 0 then
    n = insert_by_marker(key, 'AFTER', band, entries[1])
    if n < 0 then n = call('RPUSH', key, entries[1]) end  -- no marker (cannot happen): kept anyway
  else
    local nxt = band_after(mask, band)
    local fresh = bit_and(mask, band_bit(band)) == 0
    if not nxt then
      if fresh then
        n = call('RPUSH', key, marker(band), unpack(entries))
      else
        n = call('RPUSH', key, unpack(entries))
      end
    else
      local pivot
      if fresh then
        local _, found = insert_by_marker(key, 'BEFORE', nxt, marker(band))
        pivot = found
      end
      for i = 1, #entries do
        if pivot then
          n = call('LINSERT', key, 'BEFORE', pivot, entries[i])
        else
          n, pivot = insert_by_marker(key, 'BEFORE', nxt, entries[i])
        end
        if n < 0 then n = call('RPUSH', key, entries[i]) end  -- as above
      end
    end
  end
  return n, bit_or(mask, band_bit(band))
end

-- Queues a host's items of one call in its small list, if they fit: `pend`
-- band -> its items, in order; `mask` its bands before (0: nothing queued),
-- `qc` its `qc` (nil if it has none). Returns whether they went there (if
-- not, the host has band lists and the caller pushes them there), and
-- whether the host is still small after them.
local function compact_add(host, mask, qc, pend, front)
  if mask ~= 0 and not qc then return false, false end  -- band lists already
  local key = P .. 'q:' .. host
  local total = 0
  for _, items in pairs(pend) do total = total + #items end
  if total > COMPACT_MAX then
    if mask ~= 0 then
      compact_split(host, key, mask)
    elseif qc then
      call('HDEL', P .. 'h:' .. host, 'qc')
    end
    return false, false
  end
  if not qc then call('HSET', P .. 'h:' .. host, 'qc', 1) end
  -- Bands in any order: each put finds its place from the mask so far.
  local n
  for band, items in pairs(pend) do n, mask = compact_put(key, mask, band, items, front) end
  if n <= COMPACT_MAX then return true, true end
  compact_split(host, key, mask)
  return true, false
end

-- Queues an item in band `band` (score mode: appended, or with `front` put
-- at the head, in its band lists or its small list; credit mode: by its
-- credit). Returns whether the host had
-- nothing queued before, and its new mask and d. `qb`: the host's `qb` if the
-- caller has it (nil: read here). It is written here unless `defer_qb` (the
-- caller writes it).
local function queue_push(host, band, item, front, qb, defer_qb)
  local hk = P .. 'h:' .. host
  if qb == nil then qb = call('HGET', hk, 'qb') end
  local mask, d = split_qb(qb)
  local was_empty = mask == 0
  local new_mask
  if CREDIT then
    local fp = sub(item, 1, 8)
    local c, lq = item_credit(item)
    call('HSET', P .. 'b:' .. host, fp, struct.pack('>d', lq) .. sub(item, 25))
    call('ZADD', P .. 'q:' .. host, units_s(c), fp)
    local best = first_band(mask)
    new_mask = (best == nil or band < best) and band_bit(band) or mask
  else
    if not compact_add(host, mask, call('HGET', hk, 'qc'), {[band] = {item}}, front) then
      call(front and 'LPUSH' or 'RPUSH', P .. 'q:' .. host .. ':' .. NUM[band], item)
    end
    new_mask = bit_or(mask, band_bit(band))
  end
  if new_mask ~= mask then
    mask = new_mask
    if not defer_qb then write_qb(hk, mask, d) end
  end
  return was_empty, mask, d
end

-- The host's best item: band, item, and the mask left (0: empty); or nil
-- and the mask. The caller writes the mask. `qc`: the host's `qc` (false:
-- none; nil: read here).
local function queue_pop(host, mask, qc)
  if CREDIT then
    local key = P .. 'q:' .. host
    local top = call('ZPOPMAX', key)
    if not top[1] then return nil, nil, 0 end
    local bk = P .. 'b:' .. host
    local body = call('HGET', bk, top[1])
    call('HDEL', bk, top[1])
    local c = tonumber(top[2]) * MIN_CREDIT
    local next_best = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    mask = next_best[2] and band_bit(band_of(tonumber(next_best[2]) * MIN_CREDIT)) or 0
    if not body then return nil, nil, mask end  -- cannot happen: no URL without its body
    return band_of(c), top[1] .. struct.pack('>d', c) .. body, mask
  end
  if mask == 0 then return nil, nil, 0 end
  if qc == nil then qc = call('HGET', P .. 'h:' .. host, 'qc') end
  if qc then
    -- The list's head is its first band's (no marker before it).
    local key = P .. 'q:' .. host
    local e = call('LPOP', key)
    local band = first_band(mask)
    local mb = e and marker_band(e)
    if mb then  -- cannot happen: a marker at the head
      band = mb
      e = call('LPOP', key)
    end
    if not e then return nil, nil, 0 end
    local after = call('LINDEX', key, 0)
    if not after then
      mask = 0
    elseif marker_band(after) then  -- the next band's marker: this band is done
      call('LPOP', key)
      mask = with_band(mask, band, false)
    end
    return band, e, mask
  end
  local band = first_band(mask)
  while band do
    local key = P .. 'q:' .. host .. ':' .. NUM[band]
    local item = call('LPOP', key)
    if not item or call('LLEN', key) == 0 then mask = with_band(mask, band, false) end
    if item then return band, item, mask end
    band = first_band(mask)
  end
  return nil, nil, mask
end

-- Back to the head of its band. Returns 0 (and drops this copy) if the URL is
-- queued again already (credit mode: a dont_filter copy of it).
local function requeue(host, band, item)
  if CREDIT and call('HEXISTS', P .. 'b:' .. host, sub(item, 1, 8)) == 1 then return 0 end
  local hk = P .. 'h:' .. host
  local qb = call('HGET', hk, 'qb') or false
  local _, mask, d = queue_push(host, band, item, true, qb, true)
  if d > 0 and band < d - 1 then d = enter_due(host, band) end  -- a better band: due there
  local v = qb_s(mask, d)
  if v ~= qb then call('HSET', hk, 'qb', v) end
  return 1
end

-- Back in its host's queue, at the end of its band, from a list it was set
-- aside in (unpark.lua, budget_release.lua): the host made ready if it was
-- empty, else its due band raised. Returns 0 (and drops this copy) if the URL
-- is queued again already (credit mode: a dont_filter copy of it).
local function queue_back(host, band, item, ddelay, dconc)
  if CREDIT and call('HEXISTS', P .. 'b:' .. host, sub(item, 1, 8)) == 1 then return 0 end
  if queue_push(host, band, item) then
    make_ready(host, ddelay, dconc, true)
  else
    raise_due(host, band)
  end
  return 1
end

-- The counts after n leases ended with their URLs requeued: pushed of them
-- (requeue's sum; a copy already queued is dropped) are queued again.
local function count_requeued(n, pushed)
  call('HINCRBY', P .. 'n', 'leased', -n)
  call('HINCRBY', P .. 'n', 'queued', pushed)
end
