-- Acknowledge a finished job that belongs to a batch (or is a batch's callback) and count it, in one
-- step: only if the LREM took it, so an ack written twice counts once. Sent unreplied as EVAL, so it
-- is kept short: when the count may complete a transition (or a callback ran) it leaves a marker in
-- the checks list, in the same step, and a server's checker (batch/checker.rs, batch_check.lua)
-- applies the transition; a marker outlives any crash.
-- KEYS[1] the working list   KEYS[2] the checks list   ARGV[1] the job   ARGV[2] batch key or ''
-- ARGV[3] jid   ARGV[4] bid   ARGV[5] '<event>:<bid>' of a callback job, or ''
-- ARGV[6] '1' when the job has failed before (it has a retry_count): only then can it be in :failed.
-- `unsettled` is pending less failures; it reaching 0 is what may complete the batch.
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then return 0 end
local k = ARGV[2]
if k ~= '' then
  if redis.call('HINCRBY', k, 'pending', -1) < 0 and redis.call('HEXISTS', k, 'created_at') == 0 then
    redis.call('DEL', k) -- its data expired: the HINCRBY made the key, nothing is left to count
  else
    local u
    if ARGV[6] == '1' and redis.call('HDEL', k .. ':failed', ARGV[3]) == 1 then
      redis.call('HDEL', k .. ':dead', ARGV[3])
      u = tonumber(redis.call('HGET', k, 'unsettled'))
    else
      u = redis.call('HINCRBY', k, 'unsettled', -1)
    end
    if u <= 0 then redis.call('LPUSH', KEYS[2], 'c ' .. ARGV[4]) end
  end
end
if ARGV[5] ~= '' then redis.call('LPUSH', KEYS[2], 'd ' .. ARGV[5]) end
return 1
