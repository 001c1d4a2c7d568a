-- budget_release(P, default_delay_ms, default_conc, budget_base, seed_votes,
--                max_n, then per host: host, how)
-- Moves URLs waiting over their host's budget (`ob:<host>`, add.lua) into
-- the host's queue, in order, at most max_n in all. how: "b" as many as the
-- host's budget has room for now (a raised CRAWL_HOST_BUDGET); "s" the host is
-- in the crawl's scope (the worker's verdict: its h:<host> `scoped` is set):
-- all of them, as for every host of the operator's (unless seed_votes > 0);
-- "a" all of them (the operator's command: its budget stays for later URLs).
-- A parked host's URLs stay (`crawlproject parked --requeue` first).
-- Each URL leaves the overflow and enters the queue in this one script: none
-- is lost or queued twice. Returns {taken off overflows, queued}.
local ddelay = tonumber(ARGV[2])
local dconc = tonumber(ARGV[3])
local base = tonumber(ARGV[4]) or 0
local op_votes = tonumber(ARGV[5]) or 0
local left = tonumber(ARGV[6])
local taken, pushed = 0, 0
for i = 7, #ARGV - 1, 2 do
  if left <= 0 then break end
  local host, how = ARGV[i], ARGV[i + 1]
  local hk = P .. 'h:' .. host
  local h = call('HMGET', hk, 'parked', 'seed', 'scoped')
  if how == 's' and not h[3] then
    call('HSET', hk, 'scoped', 1)
    h[3] = '1'
  end
  if not h[1] then
    local budget = nil
    if how ~= 'a' then budget = host_budget(host, base, op_votes, h[2] or h[3], nil) end
    local out = take_over_budget(host, hk, budget, left)
    for _, it in ipairs(out) do
      -- (credit mode: a URL over budget was never queued; a copy queued is kept alone)
      pushed = pushed + queue_back(host, it[1], it[2], ddelay, dconc)
    end
    taken, left = taken + #out, left - #out
  end
end
if taken > 0 then call('HINCRBY', P .. 'n', 'budget_released', taken) end
if pushed > 0 then
  call('HINCRBY', P .. 'n', 'queued', pushed)
  call('HINCRBY', P .. 'n', 'enqueued', pushed)
end
return {taken, pushed}
