-- A process's lease of concurrency slots (limits/lease.rs), looked at by its lease keeper: gives the
-- unused leased slots ARGV[5..] back when jobs of the limit wait (deferred) or when ARGV[4] is '1'
-- (the class went idle here), resuming deferred jobs into them.
-- ARGV[1]  namespace prefix   ARGV[2]  identity   ARGV[3]  limit key   ARGV[4]  force ('1'/'0')
-- ARGV[5..]  the unused leased slots' fields
-- Returns {given back (1/0), deferred jobs waiting}.
local prefix, identity, lkey, force = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local waiting = redis.call('LLEN', lim_wait(prefix, lkey))
if force ~= '1' and waiting == 0 then
  return {0, 0}
end
local held = prefix .. 'jq:limit:held:' .. identity
for i = 5, #ARGV do
  lim_free(prefix, lkey, ARGV[i], identity)
  redis.call('SREM', held, ARGV[i] .. ' ' .. lkey)
end
if waiting > 0 then
  lim_pump(prefix, lkey, lim_cap(prefix, lkey), lim_now_ms())
end
return {1, waiting}
