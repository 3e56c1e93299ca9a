-- The checker's step (batch/checker.rs), also run before a status is read (store.rs): take up to
-- ARGV[3] markers left by acks and apply them in this same step. 's<n>:<bid><jid>' (a job that never
-- failed) and 'r<n>:<bid><jid>' (one that did; n is the bid's length) count a job as succeeded, in
-- bulk per batch, then run its batch's transitions once; 'd <event>:<bid>' records that the event's
-- callbacks ran. From the older list (left by servers that ran batch_ack.lua, whose ack counted the
-- job): 'c <bid>' runs the transitions, 'd ...' as above. Returns how many it took from KEYS[1].
-- KEYS[1] the acks list   KEYS[2] the older checks list   ARGV[1] namespace   ARGV[2] now
-- ARGV[3] most markers
local ms = redis.call('RPOP', KEYS[1], tonumber(ARGV[3])) or {}
local taken = #ms
for _, m in ipairs(redis.call('RPOP', KEYS[2], 100) or {}) do ms[#ms + 1] = m end
if #ms == 0 then return 0 end
local ns, now = ARGV[1], ARGV[2]
local groups, order = {}, {}
local function group(bid)
  local g = groups[bid]
  if not g then
    g = {s = {}, r = {}}
    groups[bid] = g
    order[#order + 1] = bid
  end
  return g
end
for _, m in ipairs(ms) do
  local kind = string.sub(m, 1, 1)
  if kind == 's' or kind == 'r' then
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
for _, bid in ipairs(order) do
  local g = groups[bid]
  if #g.s == 0 and #g.r == 0 then bcheck(ns, bid, now) else bsucceeded_many(ns, bid, g.s, g.r, now) end
end
return taken
