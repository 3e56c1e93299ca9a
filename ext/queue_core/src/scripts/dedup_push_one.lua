-- perform_async's common deduplicated push: one immediate job whose push records nothing beside the
-- key (no wal_locations, no reschedule_once). It takes the job's idempotency key with SET NX EX and
-- queues the job; or, the key being held, drops the job when the worker drops duplicates (the queue's
-- flag, if it is read here, not turning dropping off). Anything else a held key calls for (marking
-- the duplicate) is left to dedup_push.lua: this script then changes nothing and returns false.
-- Kept to the fewest keys, arguments and calls: every one costs Redis time on each push.
--
-- KEYS[1] queues   KEYS[2] the queue   KEYS[3] the idempotency key   KEYS[4] feature flags (HASH)
-- KEYS[5] metrics counters (HASH)
-- ARGV[1] queue name   ARGV[2] jid   ARGV[3] ttl (seconds)   ARGV[4] job JSON
-- ARGV[5] '1' = drop duplicates   ARGV[6] flag field ('' = do not read)   ARGV[7] the drops' field
-- Returns '' pushed, 'd<jid>' dropped as a duplicate of jid, false: call dedup_push.lua.
if redis.call('SET', KEYS[3], ARGV[2], 'NX', 'EX', ARGV[3]) then
  redis.call('LPUSH', KEYS[2], ARGV[4])
  redis.call('SADD', KEYS[1], ARGV[1])
  return ''
end
if ARGV[5] ~= '1' then
  return false
end
if ARGV[6] ~= '' then
  -- The flag's values that turn dropping off, as in dedup_push.lua.
  local off = redis.call('HGET', KEYS[4], ARGV[6])
  if off and off ~= '0' and off ~= 'false' and off ~= '' then
    return false
  end
end
local holder = redis.call('GET', KEYS[3])
redis.call('HINCRBY', KEYS[5], ARGV[7], 1)
return 'd' .. holder
