-- Ordered jobs: take up to a batch of due ids from one shard this process holds, moving each id's
-- whole state into the `processing:*` keys in the same atomic step.
--
-- leases (KEYS[1])  the queue's lease hash (shard -> owner identity)
-- ARGV[1]  the queue's key prefix   ARGV[2]  this process's identity
-- ARGV[3]  'lag' (the shard whose oldest due id is oldest) or 'seq' (the first listed shard with a due id)
-- ARGV[4]  batch size   ARGV[5 ..]  candidate shards
--
-- A shard is only read while the lease hash names this process as its owner. An id already in
-- processing (left by a previous owner, or taken by a sibling thread) is skipped, so one id never runs
-- twice at once anywhere. An id whose payload key is not a sorted set (or is missing) is not run: it goes to the
-- morgue with the reason, its bad value renamed to `morgue:invalid:payloads:<id>`.
-- Returns {} or {shard, {id, retry_count, perform_in, {payload, score, ...}}, ...}.
--
-- A library chunk: it defines `ordered_fetch(leases, args)`, which the fetch script calls with
-- (KEYS[1], ARGV) and the settle-and-fetch script with its share of ARGV (`ordered_settle_fetch.lua`).
-- Takes up to `batch` due ids of shard `s` that are not in processing; returns {s, entries...}.
local function ordered_take(p, s, batch, now)
  local sk = p .. 'ids_scored_by_perform_in:' .. s
  local ppi = p .. 'processing:ids_with_perform_in:' .. s
  local prc = p .. 'processing:ids_with_retry_count:' .. s
  local perr = p .. 'processing:errors:' .. s
  local plen = p .. 'processing_length_by_shard'
  local in_flight = tonumber(redis.call('HGET', plen, s) or '0')
  if in_flight < 0 then in_flight = 0 end
  local due = redis.call('ZRANGEBYSCORE', sk, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch + in_flight)
  local out = {s}
  local taken = 0
  for i = 1, #due, 2 do
    if taken >= batch then break end
    local id, perform_in = due[i], due[i + 1]
    if redis.call('HEXISTS', ppi, id) == 0 then
      taken = taken + 1
      local retry = redis.call('ZSCORE', p .. 'all_ids_scored_by_retry_count', id) or '-1'
      local err = redis.call('HGET', p .. 'errors', id)
      redis.call('ZREM', sk, id)
      redis.call('ZREM', p .. 'all_ids_lex', id)
      redis.call('ZREM', p .. 'all_ids_scored_by_perfrom_in', id)
      redis.call('ZREM', p .. 'all_ids_scored_by_retry_count', id)
      if err then redis.call('HDEL', p .. 'errors', id) end
      local pk = p .. 'payloads:' .. id
      -- Reading the payloads first tells a good key (a non-empty sorted set) from bad data, no TYPE.
      local payloads = redis.pcall('ZRANGE', pk, 0, -1, 'WITHSCORES')
      if type(payloads) == 'table' and not payloads.err and #payloads > 0 then
        redis.call('RENAME', pk, p .. 'processing:payloads:' .. id)
        redis.call('HSET', ppi, id, perform_in)
        redis.call('HSET', prc, id, retry)
        if err then redis.call('HSET', perr, id, err) end
        out[#out + 1] = {id, retry, perform_in, payloads}
      elseif redis.call('TYPE', pk).ok ~= 'none' then
        ordered_set_aside(p, id, pk, now)
      else
        redis.call('ZADD', p .. 'morgue:all_ids_lex', 0, id)
        redis.call('ZADD', p .. 'morgue:all_ids_scored_by_updated_at', now, id)
        redis.call('HSET', p .. 'morgue:errors', id, 'payloads:' .. id .. ' is missing or empty')
      end
    end
  end
  if #out > 1 then
    redis.call('HINCRBY', plen, s, #out - 1)
  end
  return out
end

local function ordered_fetch(leases, ARGV)
  local p, me, mode, batch = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
  local now = ordered_time()
  local owners = redis.call('HMGET', leases, unpack(ARGV, 5))
  -- The held shards with a due id, in the scheduler's order: listed order for seq, oldest due id first
  -- (listed order among equals) for lag. The first one that yields an id not already in processing is
  -- taken from, so a shard whose due ids are all running (pushed again while they run) does not
  -- hold up the others.
  local candidates = {}
  for i = 5, #ARGV do
    local s = ARGV[i]
    if owners[i - 4] == me then
      local first = redis.call('ZRANGE', p .. 'ids_scored_by_perform_in:' .. s, 0, 0, 'WITHSCORES')
      local at = first[2] and tonumber(first[2])
      if at and at <= now then
        candidates[#candidates + 1] = {s, at, i}
      end
    end
  end
  if mode ~= 'seq' then
    table.sort(candidates, function(a, b)
      if a[2] ~= b[2] then return a[2] < b[2] end
      return a[3] < b[3]
    end)
  end
  for _, c in ipairs(candidates) do
    local out = ordered_take(p, c[1], batch, now)
    if #out > 1 then
      return out
    end
  end
  return {}
end
