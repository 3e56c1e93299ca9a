-- Put a dead gitlab-sidekiq-fetcher process's working list back on its queue (WIRE.md §6).
--
-- KEYS[1]  the working list (`working:queue:<name>:<identity>`)
-- KEYS[2]  its owner's heartbeat (`reliable-fetcher-heartbeat-<identity>`)
-- KEYS[3]  the queue list          KEYS[4]  the `queues` set
-- ARGV[1]  the queue name
--
-- The owner is dead when its heartbeat has expired, as the fetcher's own cleaner decides; checked in
-- the same atomic step as the move, so a process that beat again keeps its list. The jobs go to the
-- right of the queue, oldest rightmost (the fetcher pushes each job it takes on the left of its
-- working list), so they run next, in the order they were taken. One list per call: a job is moved
-- by whichever recoverer (ours, or the fetcher's cleaner popping job by job) takes it first, never
-- twice. Returns -1 if the owner is alive, else the number of jobs moved.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return -1
end
local moved = 0
while redis.call('LMOVE', KEYS[1], KEYS[3], 'LEFT', 'RIGHT') do
  moved = moved + 1
end
if moved > 0 then
  redis.call('SADD', KEYS[4], ARGV[1])
end
return moved
