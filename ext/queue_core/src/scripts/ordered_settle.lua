-- Ordered jobs: settle ids of one shard after they ran.
--
-- leases (KEYS[1])  the queue's lease hash
-- ARGV[1]  the queue's key prefix   ARGV[2]  this process's identity   ARGV[3]  shard
-- ARGV[4]  max_retry_count   ARGV[5]  the retry_count payloads return with after one went to the morgue
-- ARGV[6]  how many ids succeeded   ARGV[7 .. 6 + ARGV[6]]  those ids
-- ARGV[7 + ARGV[6] ..]  groups of 4 for the others: id, 'fail' or 'back', error text, retry delay in seconds
--
-- Returns -1 without writing anything when this process no longer holds the shard: a new owner has
-- recovered the in-flight state and owns it now. Otherwise {processed, failed, {ids sent to the morgue}}.
-- Success drops the in-flight state. Failure: retry_count + 1, perform_in = now + delay, the error kept
-- in `errors`; at retry_count >= max_retry_count the oldest payload goes to the morgue with the error
-- and the rest return with perform_in = now and ARGV[5] as retry_count. Returning merges with what was
-- pushed meanwhile: payloads union (lowest score wins), perform_in and retry_count are the failed job's.
-- 'back' puts an id that did not run back as it was fetched (its perform_in, retry_count and error),
-- merged as a recovered id merges: neither processed nor failed.
--
-- A library chunk: it defines `ordered_settle(leases, args)`, which the settle script calls with
-- (KEYS[1], ARGV) and the settle-and-fetch script with its share of ARGV (`ordered_settle_fetch.lua`).
local function ordered_settle(leases, ARGV)
  local p, me, s = ARGV[1], ARGV[2], ARGV[3]
  local max, reset = tonumber(ARGV[4]), tonumber(ARGV[5])
  if redis.call('HGET', leases, s) ~= me then
    return -1
  end
  local now
  local function clock()
    if not now then
      now = ordered_time()
    end
    return now
  end
  local ppi = p .. 'processing:ids_with_perform_in:' .. s
  local prc = p .. 'processing:ids_with_retry_count:' .. s
  local perr = p .. 'processing:errors:' .. s
  local processed, failed, settled, morgued = 0, 0, 0, {}
  -- Successes, the common case, are settled together: one command per key for all of them.
  local oks = tonumber(ARGV[6])
  local done = {}
  for i = 7, 6 + oks do
    done[#done + 1] = ARGV[i]
  end
  if #done > 0 then
    -- HDEL counts the ids still in processing: a repeated settle finds them gone, and then the
    -- other deletes find nothing either.
    local n = ordered_each('HDEL', ppi, done)
    if n > 0 then
      local keys = {}
      for i = 1, #done do
        keys[i] = p .. 'processing:payloads:' .. done[i]
      end
      ordered_each('HDEL', prc, done)
      if redis.call('HLEN', perr) > 0 then ordered_each('HDEL', perr, done) end
      ordered_del(keys)
      settled, processed = n, n
    end
  end
  for i = 7 + oks, #ARGV, 4 do
    local id, outcome, err, delay = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
    local was_at = outcome == 'back' and redis.call('HGET', ppi, id)
    -- HDEL answers whether the id was in processing (a repeated settle finds it gone).
    if redis.call('HDEL', ppi, id) == 1 then
      local retry = tonumber(redis.call('HGET', prc, id) or '-1') or -1
      local ppk = p .. 'processing:payloads:' .. id
      local was_err = outcome == 'back' and redis.call('HGET', perr, id)
      redis.call('HDEL', prc, id)
      redis.call('HDEL', perr, id)
      settled = settled + 1
      if outcome == 'back' then
        ordered_return(p, s, id, was_at, retry, was_err, clock())
      else
        failed = failed + 1
        retry = retry + 1
        local perform_in = clock() + delay
        if retry >= max then
          local oldest = redis.pcall('ZRANGE', ppk, 0, 0, 'WITHSCORES')
          if oldest.err then
            ordered_set_aside(p, id, ppk, now)
          elseif oldest[1] then
            redis.call('ZADD', p .. 'morgue:payloads:' .. id, 'LT', oldest[2], oldest[1])
            redis.call('ZREM', ppk, oldest[1])
          end
          redis.call('ZADD', p .. 'morgue:all_ids_lex', 0, id)
          redis.call('ZADD', p .. 'morgue:all_ids_scored_by_updated_at', now, id)
          redis.call('HSET', p .. 'morgue:errors', id, err)
          morgued[#morgued + 1] = id
          retry = reset
          perform_in = now
        end
        -- Requeued if any payload is left (the failed ones, or ones pushed meanwhile); updating an
        -- id already queued by a push gives it the failed job's perform_in and retry_count.
        ordered_requeue(p, s, id, ppk, perform_in, retry, err, now)
      end
    end
  end
  if settled > 0 then redis.call('HINCRBY', p .. 'processing_length_by_shard', s, -settled) end
  if processed > 0 then redis.call('INCRBY', p .. 'processed', processed) end
  if failed > 0 then redis.call('INCRBY', p .. 'failed', failed) end
  return {processed, failed, morgued}
end
