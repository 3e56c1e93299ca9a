-- Move due jobs from `schedule` or `retry` to their queues, atomically: a job leaves the sorted set
-- only in the same step that puts it on its queue, so no crash can lose it, and a job two schedulers
-- both saw moves once (ZREM answers 1 to only one of them).
--
-- KEYS[1]  the sorted set   KEYS[2]  the `queues` set   KEYS[3]  the dead set
-- KEYS[3+i]  the destination list of entry i (a queue, or the dead set for a job that cannot run)
-- ARGV[1], ARGV[2]  dead set trim (as in fail.lua); ARGV[3]  now
-- ARGV[4 ..]  triples (member as stored, job to push, queue name or '' for the dead set)
local moved = 0
local entry = 0
for i = 4, #ARGV, 3 do
  entry = entry + 1
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    local queue = ARGV[i + 2]
    if queue == '' then
      redis.call('ZADD', KEYS[3], ARGV[3], ARGV[i + 1])
      redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[1])
      redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(ARGV[2]))
    else
      redis.call('LPUSH', KEYS[3 + entry], ARGV[i + 1])
      redis.call('SADD', KEYS[2], queue)
    end
    moved = moved + 1
  end
end
return moved
