-- Replace jobs of a sorted set (`schedule` or `retry`) by their rewritten JSON, each in one atomic
-- step and with its score: a job the scheduler moved meanwhile (no score any more) is left alone.
--
-- KEYS[1]  the sorted set
-- ARGV[1 ..] pairs (job as stored, rewritten job)
--
-- Returns the number of jobs rewritten.
local moved = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('ZADD', KEYS[1], score, ARGV[i + 1])
    moved = moved + 1
  end
end
return moved
