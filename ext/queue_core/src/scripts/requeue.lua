-- Put jobs a fetcher holds back on the right of their queue, so they run next.
--
-- KEYS[1]  the working list   KEYS[2]  the queue list   KEYS[3]  the `queues` set
-- ARGV[1]  the queue name     ARGV[2 ..] the jobs, oldest first ('*' alone: every job in the list)
--
-- A job is pushed back only if it was still in the working list, so two processes requeueing the same
-- list (shutdown racing recovery) cannot duplicate it. Returns the number of jobs moved.
local moved = 0
if ARGV[2] == '*' and #ARGV == 2 then
  while redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') do
    moved = moved + 1
  end
else
  for i = #ARGV, 2, -1 do
    if redis.call('LREM', KEYS[1], -1, ARGV[i]) > 0 then
      redis.call('RPUSH', KEYS[2], ARGV[i])
      moved = moved + 1
    end
  end
end
if moved > 0 then
  redis.call('SADD', KEYS[3], ARGV[1])
end
return moved
