-- The scheduler's poll: take or keep the lease and, if ours, count the jobs due in both sets, so an
-- idle leader costs Redis one call per poll.
--
-- KEYS[1]  the lease key   KEYS[2]  `schedule`   KEYS[3]  `retry`
-- ARGV[1]  our identity    ARGV[2]  lease length in milliseconds   ARGV[3]  now (epoch seconds)
-- Returns -1 when another process holds the lease, else the number of due jobs.
local holder = redis.call('GET', KEYS[1])
if holder ~= false and holder ~= ARGV[1] then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return redis.call('ZCOUNT', KEYS[2], '-inf', ARGV[3]) + redis.call('ZCOUNT', KEYS[3], '-inf', ARGV[3])
