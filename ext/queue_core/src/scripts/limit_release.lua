-- A job that held a concurrency slot finished (done, failed, or handed back): the slot is given back
-- and the oldest deferred job resumed into it. Written unreplied after the job's acknowledgement.
-- ARGV[1]  namespace prefix   ARGV[2]  identity   ARGV[3]  jid   ARGV[4]  limit key
local prefix, identity, jid, lkey = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
lim_free(prefix, lkey, jid, identity)
redis.call('SREM', prefix .. 'jq:limit:held:' .. identity, jid .. ' ' .. lkey)
if redis.call('LLEN', lim_wait(prefix, lkey)) > 0 then
  lim_pump(prefix, lkey, lim_cap(prefix, lkey), lim_now_ms())
end
return 1
