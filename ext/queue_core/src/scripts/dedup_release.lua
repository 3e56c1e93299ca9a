-- Release a running job's idempotency key (dedup_fns.lua: only if the job still holds it), after
-- acknowledging the job when it has finished, and read the positions kept for it beside the key.
-- Sent unreplied (its reply switched off) as EVAL, never EVALSHA, so it cannot be skipped as NOSCRIPT.
--
-- KEYS[1] idempotency key   KEYS[2] its side hash   KEYS[3] the queue   KEYS[4] queues
-- KEYS[5] the working list holding the job
-- ARGV[1] jid ('' = release nothing)   ARGV[2] job to reschedule or ''   ARGV[3] its jid
-- ARGV[4] TTL   ARGV[5] queue name   ARGV[6] the job to acknowledge ('' = none)
-- ARGV[7] '1' = return the side hash (read before the release)
if ARGV[6] ~= '' then
  redis.call('LREM', KEYS[5], -1, ARGV[6])
end
local kept = {}
if ARGV[7] == '1' then
  kept = redis.call('HGETALL', KEYS[2])
end
dedup_release(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
return kept
