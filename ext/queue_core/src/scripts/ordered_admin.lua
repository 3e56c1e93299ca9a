-- Ordered jobs: the dashboard's actions on a batch of ids of one queue, each atomic per call.
--
-- ARGV[1]  the queue's key prefix   ARGV[2]  action   ARGV[3 ..]  pairs of (id, shard)
-- Actions:
--   'requeue'  morgue -> queue: payloads union into the queue (lowest score wins); the id gets
--              perform_in = now and retry_count = -1 (the morgue + queued rule); the morgue entry goes
--   'delete'   drop the morgue entry
--   'now'      a queued id becomes due now (only if it was due later)
--   'kill'     a queued id that has failed (retry_count >= 0) goes to the morgue whole, with its error
--   'drop'     a queued id that has failed (retry_count >= 0) is deleted
-- Ids in processing are not touched by 'now', 'kill', 'drop'. Returns how many ids were changed.
local p, action = ARGV[1], ARGV[2]
local now = ordered_time()
local changed = 0
local function unqueue(id, s)
  redis.call('ZREM', p .. 'all_ids_lex', id)
  redis.call('ZREM', p .. 'all_ids_scored_by_perfrom_in', id)
  redis.call('ZREM', p .. 'all_ids_scored_by_retry_count', id)
  redis.call('ZREM', p .. 'ids_scored_by_perform_in:' .. s, id)
  redis.call('HDEL', p .. 'errors', id)
  redis.call('DEL', p .. 'payloads:' .. id)
end
local function unmorgue(id)
  redis.call('ZREM', p .. 'morgue:all_ids_lex', id)
  redis.call('ZREM', p .. 'morgue:all_ids_scored_by_updated_at', id)
  redis.call('HDEL', p .. 'morgue:errors', id)
  redis.call('DEL', p .. 'morgue:payloads:' .. id)
end
for i = 3, #ARGV, 2 do
  local id, s = ARGV[i], ARGV[i + 1]
  if action == 'requeue' then
    if redis.call('ZSCORE', p .. 'morgue:all_ids_lex', id) then
      local err = redis.call('HGET', p .. 'morgue:errors', id)
      ordered_requeue(p, s, id, p .. 'morgue:payloads:' .. id, now, -1, err, now)
      unmorgue(id)
      changed = changed + 1
    end
  elseif action == 'delete' then
    if redis.call('ZSCORE', p .. 'morgue:all_ids_lex', id) then
      unmorgue(id)
      changed = changed + 1
    end
  elseif action == 'now' then
    local at = redis.call('ZSCORE', p .. 'all_ids_scored_by_perfrom_in', id)
    if at and tonumber(at) > now then
      redis.call('ZADD', p .. 'all_ids_scored_by_perfrom_in', now, id)
      redis.call('ZADD', p .. 'ids_scored_by_perform_in:' .. s, now, id)
      changed = changed + 1
    end
  elseif action == 'kill' or action == 'drop' then
    local retry = redis.call('ZSCORE', p .. 'all_ids_scored_by_retry_count', id)
    if retry and tonumber(retry) >= 0 then
      if action == 'kill' then
        local pk, mk = p .. 'payloads:' .. id, p .. 'morgue:payloads:' .. id
        if redis.call('EXISTS', pk) == 1 then
          ordered_union(p, id, mk, pk, now)
        end
        redis.call('ZADD', p .. 'morgue:all_ids_lex', 0, id)
        redis.call('ZADD', p .. 'morgue:all_ids_scored_by_updated_at', now, id)
        local err = redis.call('HGET', p .. 'errors', id)
        redis.call('HSET', p .. 'morgue:errors', id, err or 'killed')
      end
      unqueue(id, s)
      changed = changed + 1
    end
  end
end
return changed
