-- Host budgets (add.lua, budget_release.lua), after _prelude.lua (whose
-- names it uses): a host's page budget, and its overflow list `ob:<host>`
-- of URLs over it. Prepended, like the prelude, part by part to the scripts
-- that use it (crawlproject/lua.py). See keys.py for the schema.

-- A host's page budget (URLs it may queue):
-- `base` (CRAWL_HOST_BUDGET) for each vote, its own included, `votes` the
-- other registered domains linking to it (`il:<host>`; nil: counted here).
-- Returns it (nil: no budget) and `votes`. The operator's hosts (`op`: a
-- seed's, h:<host> `seed`, or one of the crawl's scope, `scoped`) have none,
-- unless `op_votes` (CRAWL_HOST_BUDGET_SEED_VOTES) > 0 gives them that many
-- votes more; nor has a host MAX_VOTES domains link to, or any with base 0.
local MAX_VOTES = 256
local function host_budget(host, base, op_votes, op, votes)
  if base <= 0 or (op and op_votes <= 0) then return nil, votes end
  if not votes then votes = call('SCARD', P .. 'il:' .. host) end
  if votes >= MAX_VOTES then return nil, votes end
  return base * (1 + votes + (op and op_votes or 0)), votes
end

-- A URL over its host's budget waits, in order, in `ob:<host>` (`band \t
-- item`), counted in `tr` (reason budget) and not in the host's `urls`.
-- Returns whether the host is newly over budget (reported once per crawl).
local function hold_over_budget(host, hk, band, item)
  call('HINCRBY', hk, 'urls', -1)
  call('RPUSH', P .. 'ob:' .. host, NUM[band] .. '\t' .. item)
  call('HINCRBY', P .. 'tr', host .. '\tbudget', 1)
  return call('HSETNX', hk, 'budgeted', 1) == 1
end

-- Takes off the host's overflow, in order, what its budget (nil: no budget)
-- has room for, at most `max_n` (nil: no limit), and counts them in its
-- `urls`; returns them as {band, item} pairs, for the caller to queue.
local function take_over_budget(host, hk, budget, max_n)
  local room = budget and budget - (tonumber(call('HGET', hk, 'urls')) or 0)
  if max_n and (not room or max_n < room) then room = max_n end
  local ob, out = P .. 'ob:' .. host, {}
  while not room or #out < room do
    local e = call('LPOP', ob)
    if not e then break end
    local tab = find(e, '\t', 1, true)
    out[#out + 1] = {tonumber(sub(e, 1, tab - 1)), sub(e, tab + 1)}
  end
  if #out == 0 then return out end
  call('HINCRBY', hk, 'urls', #out)
  local f = host .. '\tbudget'
  if call('HINCRBY', P .. 'tr', f, -#out) <= 0 then call('HDEL', P .. 'tr', f) end
  return out
end
