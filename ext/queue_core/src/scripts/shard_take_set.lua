-- Moving a queue to another shard (shard_move/), on the shard it leaves: take the given jobs of a
-- sorted set (`schedule` or `retry`) into the holding set with their scores, in one atomic step,
-- under a new batch token. A job the scheduler (or a retry) moved meanwhile has no score any more and
-- is left alone. A holding set left by a move that stopped part-way is returned instead, with its
-- token, so the next move finishes that batch first.
--
-- KEYS[1]  the sorted set   KEYS[2]  the holding set   KEYS[3]  the token key
-- ARGV[1]  a new token   ARGV[2 ..] the jobs as stored
--
-- Returns {token, {job, score, job, score, ...}}.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {redis.call('GET', KEYS[3]) or ARGV[1], redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')}
end
local taken = {}
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('ZADD', KEYS[2], score, ARGV[i])
    taken[#taken + 1] = ARGV[i]
    taken[#taken + 1] = score
  end
end
if #taken > 0 then
  redis.call('SET', KEYS[3], ARGV[1])
end
return {ARGV[1], taken}
