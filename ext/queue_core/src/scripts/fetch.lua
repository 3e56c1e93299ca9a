-- Take the next batch for one fetcher, in one round trip; count the jobs it acknowledged since its last
-- call; and, when the batch comes from a higher queue, hand the fetcher's unstarted jobs back.
--
-- KEYS[1], KEYS[2]      stat:processed, stat:processed:<today>
-- KEYS[3]               the process's fetch marks (HASH fetcher -> "<token> <pair> <count>")
-- KEYS[4]               the paused queue names (SET): a paused queue is skipped
-- KEYS[5 .. 4+2n]       n pairs (queue list, this fetcher's working list for it), in the order to try
-- KEYS[5+2n ..]         two per job to hand back: its working list, its queue list
-- ARGV[1]               the process's concurrency: a shallow queue is shared out, one job a thread
-- ARGV[2]               n, the number of queue pairs
-- ARGV[3]               acknowledged jobs to count in the processed stats
-- ARGV[4]               TTL of the daily stat key
-- ARGV[5], ARGV[6]      this fetcher's field in the fetch marks, this call's token
-- ARGV[7 .. 6+n]        the most jobs to take from each queue pair
-- ARGV[7+n .. 6+2n]     the name of each pair's queue, to look up in the paused set
-- ARGV[7+2n ..]         the jobs to hand back, next-to-run first, matching KEYS[5+2n ..]
--
-- Jobs move from the right of a queue (its oldest) to the left of the working list, so a thread that
-- runs its batch in order always acknowledges the job at the working list's right end: LREM from the
-- tail finds it at once. Every call is marked (token, pair, count; count 0 when it took nothing): if the
-- reply never reaches the fetcher, the mark tells it the call ran (its count was applied, its returns
-- handed back if it took anything), and the batch is the `count` leftmost of that working list, which
-- the fetcher claims with the token of the call it lost. Handed-back jobs go to the right of their
-- queue, in the order they would have run, so they run next. The paused set is read once per call (one
-- SMISMEMBER of the call's queue names), so pausing costs no round trip and nothing per job.
-- Returns {} or {queue pair index, job, job, ...} (oldest first).
local concurrency = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local counted = tonumber(ARGV[3])
local first_return = 5 + 2 * n
local returns = (#KEYS - first_return + 1) / 2
-- 1 for each pair whose queue is paused: one command whatever the set holds (SMEMBERS would turn the
-- whole set into a Lua table, ~1 µs more a call as soon as anything is paused).
local paused = n > 0 and redis.call('SMISMEMBER', KEYS[4], unpack(ARGV, 7 + n, 6 + 2 * n)) or {}

if counted > 0 then
  redis.call('INCRBY', KEYS[1], counted)
  redis.call('INCRBY', KEYS[2], counted)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end

for q = 1, n do
  local most = tonumber(ARGV[6 + q])
  local queue, working = KEYS[3 + 2 * q], KEYS[4 + 2 * q]
  local len = (most > 0 and paused[q] == 0) and redis.call('LLEN', queue) or 0
  if len > 0 then
    local take = math.min(most, math.ceil(len / concurrency))
    -- The `take` oldest jobs, newest first as the list holds them; then oldest first for the reply.
    local jobs = redis.call('LRANGE', queue, -take, -1)
    redis.call('LTRIM', queue, 0, -take - 1)
    local out = { q }
    for i = #jobs, 1, -1 do
      out[#out + 1] = jobs[i]
    end
    redis.call('LPUSH', working, unpack(out, 2))
    redis.call('HSET', KEYS[3], ARGV[5], ARGV[6] .. ' ' .. q .. ' ' .. #jobs)
    for i = returns, 1, -1 do
      local key = first_return + 2 * (i - 1)
      local job = ARGV[6 + 2 * n + i]
      if redis.call('LREM', KEYS[key], 1, job) > 0 then
        redis.call('RPUSH', KEYS[key + 1], job)
      end
    end
    return out
  end
end
redis.call('HSET', KEYS[3], ARGV[5], ARGV[6] .. ' 0 0')
return {}
