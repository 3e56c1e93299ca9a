-- One cron tick of one schedule, as sidekiq-cron 1.8 records it: the tick is claimed by adding it to
-- the schedule's `:enqueued` sorted set (score: the tick's epoch seconds, member: its ISO 8601 UTC
-- time, the pair sidekiq-cron writes), and only the process whose ZADD added it pushes the job. So a
-- tick is enqueued once however many of our processes, or sidekiq-cron pollers, see it. In the same
-- step: `last_enqueue_time`, the `:jid_history` entry (trimmed) and the day-old ticks forgotten.
--
-- KEYS[1] cron_job:<name>   KEYS[2] cron_job:<name>:enqueued   KEYS[3] cron_job:<name>:jid_history
-- KEYS[4] `queues`          KEYS[5] the job's queue list
-- ARGV[1] tick score   ARGV[2] tick member ('': run now, no claim and the status not read)
-- ARGV[3] job JSON   ARGV[4] queue name
-- ARGV[5] last_enqueue_time   ARGV[6] jid history entry   ARGV[7] last history index kept
-- ARGV[8] forget ticks scored below this (exclusive bound, e.g. "(1700000000.0")
-- Returns 1 if pushed, 0 if the schedule is gone or disabled, or the tick was already enqueued.
if ARGV[2] == '' then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return 0
  end
else
  local status = redis.call('HGET', KEYS[1], 'status')
  if status == false then
    if redis.call('EXISTS', KEYS[1]) == 0 then
      return 0
    end
  elseif status ~= 'enabled' then
    return 0
  end
  if redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2]) == 0 then
    return 0
  end
end
redis.call('LPUSH', KEYS[5], ARGV[3])
redis.call('SADD', KEYS[4], ARGV[4])
redis.call('HSET', KEYS[1], 'last_enqueue_time', ARGV[5])
redis.call('LPUSH', KEYS[3], ARGV[6])
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[7]))
redis.call('ZREMRANGEBYSCORE', KEYS[2], 0, ARGV[8])
return 1
