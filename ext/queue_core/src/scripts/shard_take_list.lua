-- Moving a queue to another shard (shard_move/), on the shard it leaves: take the oldest jobs of the
-- queue's list into the holding list, in one atomic step, under a new batch token. A job is then in
-- exactly one place on this shard: in the queue (a server may still take it) or held (no server
-- sees it). A holding list left by a move that stopped part-way is returned instead, with its token,
-- so the next move finishes that batch first.
--
-- KEYS[1]  the queue's list   KEYS[2]  the holding list   KEYS[3]  the token key   KEYS[4]  `queues`
-- ARGV[1]  jobs to take (0: only look for a left-over batch)   ARGV[2]  a new token   ARGV[3]  the queue's name
--
-- Returns {token, {job, ...}} with the oldest job first; no jobs when there is nothing to move.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {redis.call('GET', KEYS[3]) or ARGV[2], redis.call('LRANGE', KEYS[2], 0, -1)}
end
local jobs = {}
for _ = 1, tonumber(ARGV[1]) do
  local job = redis.call('RPOP', KEYS[1])
  if not job then
    break
  end
  jobs[#jobs + 1] = job
end
if #jobs > 0 then
  redis.call('RPUSH', KEYS[2], unpack(jobs))
  redis.call('SET', KEYS[3], ARGV[2])
end
if redis.call('LLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[4], ARGV[3])
end
return {ARGV[2], jobs}
