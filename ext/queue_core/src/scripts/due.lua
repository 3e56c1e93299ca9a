-- The scheduler's poll: take or keep the lease and, if ours, count the jobs due in both sets and find
-- the earliest one not yet due, so the leader can sleep until then. One call per poll; when nothing is
-- due (an idle leader), four cheap commands inside it.
--
-- KEYS[1]  the lease key   KEYS[2]  `schedule`   KEYS[3]  `retry`
-- ARGV[1]  our identity    ARGV[2]  lease length in milliseconds   ARGV[3]  now (epoch seconds)
-- Returns nil when another process holds the lease, else {due count, earliest later score or nil}.
-- Scores are returned as Redis formats them (strings): a number reply would be cut to an integer.
local holder = redis.call('GET', KEYS[1])
if holder ~= false and holder ~= ARGV[1] then
  return nil
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local now = tonumber(ARGV[3])
local due = 0
local next_at = false
for i = 2, 3 do
  local later = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')[2]
  if later ~= nil and tonumber(later) <= now then
    due = due + redis.call('ZCOUNT', KEYS[i], '-inf', ARGV[3])
    later = redis.call('ZRANGE', KEYS[i], '(' .. ARGV[3], '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')[2]
  end
  if later ~= nil and (next_at == false or tonumber(later) < tonumber(next_at)) then
    next_at = later
  end
end
return {due, next_at}
