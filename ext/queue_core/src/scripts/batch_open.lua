-- Create a batch (if new) and hold it open while a `jobs` block pushes into it; or reopen one.
-- ARGV[1] namespace   ARGV[2] bid   ARGV[3] now   ARGV[4] '1' create if missing   ARGV[5] '1' hold open
-- ARGV[6] description   ARGV[7] callback queue   ARGV[8] callbacks (JSON)   ARGV[9] parent bid or ''
-- ARGV[10] expiry seconds   ARGV[11..] events with callbacks
-- Returns 1, or 0 when the batch does not exist and was not to be created.
local ns, bid, now = ARGV[1], ARGV[2], ARGV[3]
local k = bkey(ns, bid)
if redis.call('EXISTS', k) == 0 then
  if ARGV[4] ~= '1' then return 0 end
  redis.call('HSET', k, 'created_at', now, 'description', ARGV[6], 'cbq', ARGV[7], 'callbacks', ARGV[8],
    'expires_in', ARGV[10], 'total', 0, 'pending', 0, 'unsettled', 0, 'open', 0, 'kids', 0, 'kids_complete', 0, 'kids_success', 0)
  for i = 11, #ARGV do redis.call('HSET', k, 'cb_' .. ARGV[i], 1) end
  if ARGV[9] ~= '' then
    local pk = bkey(ns, ARGV[9])
    if redis.call('EXISTS', pk) == 1 then
      redis.call('HSET', k, 'parent', ARGV[9])
      redis.call('HINCRBY', pk, 'kids', 1)
    end
  end
  redis.call('ZADD', ns .. 'jq:batches', now, bid)
  local ttl = bnum(ARGV[10])
  if ttl > 0 then redis.call('EXPIRE', k, ttl) end
end
if ARGV[5] == '1' then redis.call('HINCRBY', k, 'open', 1) end
return 1
