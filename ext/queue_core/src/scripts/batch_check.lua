-- The checker's step (batch/checker.rs), also run before a status is read (store.rs): take up to
-- ARGV[3] entries of each list the acks fill and apply them in this same step.
-- KEYS[1] (jq:batch-dirty, a set): bids whose acks added jids to <bid>:ok: count them.
-- KEYS[2] (jq:batch-news, this version's rarer acks): 'q<n>:<bid><jid>' (a job that failed before
--   succeeded; n is the bid's length in bytes), 'd <event>:<bid>' (the event's callbacks ran).
-- KEYS[3] (jq:batch-acks, servers of the version before): 's<n>:<bid><jid>' and 'r<n>:<bid><jid>'
--   (a job succeeded; 'r': it failed before), 'd ...'.
-- KEYS[4] (jq:batch-checks, servers that ran batch_ack.lua): 'c <bid>' (look at its transitions),
--   'd ...'.
-- Per batch, everything it got is counted at once and its transitions looked at once. Identical
-- entries are applied once: they mean the same (a jid, an event), and each effect happens once
-- anyway. Returns the most taken from KEYS[1], KEYS[2] or KEYS[3], so the caller knows whether any
-- may hold more.
-- ARGV[1] namespace   ARGV[2] now   ARGV[3] most
local most = tonumber(ARGV[3])
local dirty = redis.call('SPOP', KEYS[1], most)
local news = redis.call('RPOP', KEYS[2], most) or {}
local acks = redis.call('RPOP', KEYS[3], most) or {}
local taken = math.max(#dirty, #news, #acks)
for _, m in ipairs(acks) do news[#news + 1] = m end
for _, m in ipairs(redis.call('RPOP', KEYS[4], 100) or {}) do news[#news + 1] = m end
if #news == 0 and #dirty == 0 then return 0 end
local ns, now = ARGV[1], ARGV[2]
local groups, order, seen = {}, {}, {}
local function group(bid)
  local g = groups[bid]
  if not g then
    g = {s = {}, r = {}, q = {}}
    groups[bid] = g
    order[#order + 1] = bid
  end
  return g
end
for _, bid in ipairs(dirty) do group(bid).news = true end
for _, m in ipairs(news) do
  if not seen[m] then
    seen[m] = true
    local kind = string.sub(m, 1, 1)
    if kind == 's' or kind == 'r' or kind == 'q' then
      local len, rest = string.match(m, '^.(%d+):(.*)$')
      if len then
        len = tonumber(len)
        local list = group(string.sub(rest, 1, len))[kind]
        list[#list + 1] = string.sub(rest, len + 1)
      end
    elseif kind == 'c' then
      group(string.sub(m, 3))
    else
      bcallback_ran(ns, string.sub(m, 3), now)
    end
  end
end
for _, bid in ipairs(order) do
  local g = groups[bid]
  if #g.s == 0 and #g.r == 0 and #g.q == 0 and not g.news then
    bcheck(ns, bid, now)
  else
    bsucceeded_many(ns, bid, g, now)
  end
end
return taken
