-- Moving a queue to another shard (shard_move/), on the shard it goes to: write one batch, unless
-- the batch's token says it was written already (a move that stopped between this step and the
-- release of its holding key on the old shard, and was run again), so no job is written twice.
--
-- KEYS[1]  the token's key (`jq:moved:<token>`)   KEYS[2]  the queue's list, or the sorted set
-- KEYS[3]  `queues`
-- ARGV[1]  "list" or "zset"   ARGV[2]  the queue's name
-- ARGV[3 ..] for a list, jobs oldest first (pushed on the left, as a client pushes, keeping their
--            order); for a sorted set, pairs (job, score)
--
-- Returns the number of jobs written (0 for a batch written before).
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', 86400) then
  return 0
end
if ARGV[1] == 'list' then
  for i = 3, #ARGV do
    redis.call('LPUSH', KEYS[2], ARGV[i])
  end
  redis.call('SADD', KEYS[3], ARGV[2])
  return #ARGV - 2
end
for i = 3, #ARGV, 2 do
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i])
end
return (#ARGV - 2) / 2
