-- Settle a failed job: acknowledge it, count it, and file it where its retry policy sends it.
--
-- KEYS[1]  the working list holding the job
-- KEYS[2..5]  stat:processed, stat:processed:<today>, stat:failed, stat:failed:<today>
-- KEYS[6]  the sorted set it goes to (retry or dead); unused for 'drop'
-- ARGV[1]  the job as it was fetched (to remove from the working list)
-- ARGV[2]  'retry', 'dead' or 'drop'
-- ARGV[3]  score (retry time, or time of death)
-- ARGV[4]  the job as it is filed (with its error fields)
-- ARGV[5]  TTL of the daily stat keys
-- ARGV[6], ARGV[7]  dead set trim: drop entries scored below ARGV[6], keep at most ARGV[7] - 1
redis.call('LREM', KEYS[1], -1, ARGV[1])
for i = 2, 5 do
  redis.call('INCRBY', KEYS[i], 1)
end
redis.call('EXPIRE', KEYS[3], ARGV[5])
redis.call('EXPIRE', KEYS[5], ARGV[5])

local action = ARGV[2]
if action == 'retry' then
  redis.call('ZADD', KEYS[6], ARGV[3], ARGV[4])
elseif action == 'dead' then
  redis.call('ZADD', KEYS[6], ARGV[3], ARGV[4])
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', ARGV[6])
  redis.call('ZREMRANGEBYRANK', KEYS[6], 0, -tonumber(ARGV[7]))
end

-- A deduplicated job (until_executed) releases its idempotency key in the same step (dedup_fns.lua).
-- KEYS[7..10]  idempotency key, its side hash, the queue, queues
-- ARGV[8..12]  jid, job to reschedule or '', its jid, TTL, queue name
if #KEYS >= 10 then
  dedup_release(KEYS[7], KEYS[8], KEYS[9], KEYS[10], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12])
end
return 1
