-- Ordered jobs: push the in-flight state of one shard back into its queue, before its (new) owner
-- fetches from it. Run on every acquisition of a shard (start, take-over, hand-over).
--
-- KEYS[1]  the queue's lease hash
-- ARGV[1]  the queue's key prefix   ARGV[2]  this process's identity   ARGV[3]  shard
--
-- Only the shard's owner may run it (-1 otherwise). Each in-flight id merges back as a failed job
-- does: payloads union (lowest score wins), perform_in, retry_count and error are the in-flight ones,
-- which are older than anything pushed meanwhile. Returns how many ids went back.
local p, me, s = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HGET', KEYS[1], s) ~= me then
  return -1
end
local now = ordered_time()
local ppi = p .. 'processing:ids_with_perform_in:' .. s
local prc = p .. 'processing:ids_with_retry_count:' .. s
local perr = p .. 'processing:errors:' .. s
local flat = redis.call('HGETALL', ppi)
for i = 1, #flat, 2 do
  local id, perform_in = flat[i], flat[i + 1]
  local retry = redis.call('HGET', prc, id) or '-1'
  local err = redis.call('HGET', perr, id)
  ordered_return(p, s, id, perform_in, retry, err, now)
end
redis.call('DEL', ppi, prc, perr)
redis.call('HDEL', p .. 'processing_length_by_shard', s)
return #flat / 2
