-- Move jobs from one queue's list to another's, each in one atomic step: a job leaves the old list
-- only in the step that pushes its rewritten JSON onto the new one, so no crash can lose it, and a job
-- a server took meanwhile (LREM finds nothing) is not moved, so none is duplicated.
--
-- KEYS[1]  the old queue's list   KEYS[2]  the new queue's list   KEYS[3]  the `queues` set
-- ARGV[1]  the old queue's name   ARGV[2]  the new queue's name
-- ARGV[3 ..] pairs (job as stored, job to push), oldest first
--
-- The jobs go on the left of the new list (as a client pushes), in their old order. Once the old list
-- is empty its name leaves `queues`. Returns the number of jobs moved.
local moved = 0
for i = 3, #ARGV, 2 do
  if redis.call('LREM', KEYS[1], -1, ARGV[i]) > 0 then
    redis.call('LPUSH', KEYS[2], ARGV[i + 1])
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('SADD', KEYS[3], ARGV[2])
end
if redis.call('LLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[3], ARGV[1])
end
return moved
