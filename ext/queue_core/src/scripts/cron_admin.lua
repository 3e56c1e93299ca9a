-- Changes to one cron schedule, written as sidekiq-cron 1.8's `Job#save`, `#enable!`/`#disable!` and
-- `#destroy` write them, plus a bump of our change counter so the scheduler leader reads its index of
-- schedules again within a second.
--
-- KEYS[1] `cron_jobs`   KEYS[2] cron_job:<name>   KEYS[3] cron_job:<name>:enqueued
-- KEYS[4] cron_job:<name>:jid_history   KEYS[5] `jq:cron:changes`
-- ARGV[1] operation: 'save', 'status' or 'destroy'   ARGV[2] the member of `cron_jobs` (cron_job:<name>)
-- save:    ARGV[3] now (score)   ARGV[4] the current tick as sidekiq-cron names it, or ''
--          ARGV[5 ..] field, value pairs
--          (the current tick is recorded as enqueued, unless the schedule has ticks recorded, so a
--          schedule does not run the moment it is saved: sidekiq-cron's rule)
-- status:  ARGV[3] 'enabled' or 'disabled'; nothing happens to a schedule that does not exist
-- Returns 1 if something changed, else 0.
local op = ARGV[1]
if op == 'save' then
  redis.call('SADD', KEYS[1], ARGV[2])
  for i = 5, #ARGV, 2 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
  if ARGV[4] ~= '' and redis.call('EXISTS', KEYS[3]) == 0 then
    redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
  end
elseif op == 'status' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return 0
  end
  redis.call('HSET', KEYS[2], 'status', ARGV[3])
elseif op == 'destroy' then
  redis.call('SREM', KEYS[1], ARGV[2])
  if redis.call('DEL', KEYS[2], KEYS[3], KEYS[4]) == 0 then
    return 0
  end
else
  return redis.error_reply('unknown cron operation ' .. op)
end
redis.call('INCR', KEYS[5])
return 1
