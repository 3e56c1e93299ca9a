-- Acknowledge finished jobs and take the next batch, in one round trip.
--
-- KEYS[1], KEYS[2]      stat:processed, stat:processed:<today>
-- KEYS[3]               the process's fetch marks (HASH fetcher -> "<token> <pair> <count>")
-- KEYS[4 .. 3+2n]       n pairs (queue list, this fetcher's working list for it), in the order to try
-- KEYS[4+2n ..]         one working list per acknowledged job
-- ARGV[1]               most jobs to take (0: only acknowledge)
-- ARGV[2]               the process's concurrency: a shallow queue is shared out, one job a thread
-- ARGV[3]               n, the number of queue pairs
-- ARGV[4]               TTL of the daily stat key
-- ARGV[5], ARGV[6]      this fetcher's field in the fetch marks, this call's token
-- ARGV[7 ..]            the acknowledged jobs, matching KEYS[4+2n ..]
--
-- Jobs move from the right of a queue (its oldest) to the left of the working list, so a thread that
-- runs its batch in order always acknowledges the job at the working list's right end: LREM from the
-- tail finds it at once. A batch taken is also marked (token, pair, count): if the reply never reaches
-- the fetcher, the jobs are the `count` leftmost of that working list, and the fetcher claims them
-- with the token of the call it lost. Returns {} or {queue pair index, job, job, ...}.
local max_batch = tonumber(ARGV[1])
local concurrency = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local first_ack = 4 + 2 * n
local acks = #KEYS - first_ack + 1

for i = 0, acks - 1 do
  redis.call('LREM', KEYS[first_ack + i], -1, ARGV[7 + i])
end
if acks > 0 then
  redis.call('INCRBY', KEYS[1], acks)
  redis.call('INCRBY', KEYS[2], acks)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end

if max_batch < 1 then
  return {}
end

for q = 1, n do
  local queue, working = KEYS[2 + 2 * q], KEYS[3 + 2 * q]
  local len = redis.call('LLEN', queue)
  if len > 0 then
    local take = math.min(max_batch, math.ceil(len / concurrency))
    local out = { q }
    for _ = 1, take do
      local job = redis.call('LMOVE', queue, working, 'RIGHT', 'LEFT')
      if not job then
        break
      end
      out[#out + 1] = job
    end
    if #out > 1 then
      redis.call('HSET', KEYS[3], ARGV[5], ARGV[6] .. ' ' .. q .. ' ' .. (#out - 1))
    end
    return out
  end
end
return {}
