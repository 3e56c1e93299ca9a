-- Ordered jobs: take up to a batch of due ids from one shard this process holds, moving each id's
-- whole state into the `processing:*` keys in the same atomic step.
--
-- leases (KEYS[1])  the queue's lease hash (shard -> owner identity)
-- paused (KEYS[2])  the paused queue names (SET): a paused queue gives nothing
-- ARGV[1]  the queue's key prefix   ARGV[2]  this process's identity
-- ARGV[3]  'lag' (the shard whose oldest due id is oldest) or 'seq' (the first listed shard with a due id)
-- ARGV[4]  batch size   ARGV[5]  the queue's name   ARGV[6 ..]  candidate shards
--
-- A shard is only read while the lease hash names this process as its owner. An id already in
-- processing (left by a previous owner, or taken by a sibling thread) is skipped, so one id never runs
-- twice at once anywhere. An id whose payload key is not a sorted set (or is missing) is not run: it goes to the
-- morgue with the reason, its bad value renamed to `morgue:invalid:payloads:<id>`.
-- Returns {} or {shard, {id, retry_count, perform_in, {payload, score, ...}}, ...}.
--
-- A library chunk: it defines `ordered_fetch(leases, paused, args)`, which the fetch script calls with
-- (KEYS[1], KEYS[2], ARGV) and the settle-and-fetch script with its share of ARGV
-- (`ordered_settle_fetch.lua`).
-- Takes up to `batch` due ids of shard `s` that are not in processing; returns {s, entries...}.
-- The batch's index updates are one command per key for all its ids (ordered_each), so a batch of
-- twenty costs about as many commands as a batch of one plus two per id (its payloads' ZRANGE and
-- RENAME): Redis's cost per command dispatched from Lua, not the sorted sets' work, dominated before.
local function ordered_take(p, s, batch, now)
  local sk = p .. 'ids_scored_by_perform_in:' .. s
  local ppi = p .. 'processing:ids_with_perform_in:' .. s
  local prc = p .. 'processing:ids_with_retry_count:' .. s
  local perr = p .. 'processing:errors:' .. s
  -- The shard's ids in processing are exactly the fields of ppi (written and removed with them).
  local in_flight = redis.call('HLEN', ppi)
  local due = redis.call('ZRANGEBYSCORE', sk, '-inf', now, 'WITHSCORES', 'LIMIT', '0', batch + in_flight)
  local out = {s}
  if #due == 0 then
    return out
  end
  local ids, ats = {}, {}
  for i = 1, #due, 2 do
    ids[#ids + 1], ats[#ats + 1] = due[i], due[i + 1]
  end
  local busy = in_flight > 0 and ordered_read('HMGET', ppi, ids) or {}
  local taken, taken_at = {}, {}
  for i = 1, #ids do
    if #taken >= batch then break end
    if not busy[i] then
      taken[#taken + 1], taken_at[#taken + 1] = ids[i], ats[i]
    end
  end
  if #taken == 0 then
    return out
  end
  local retries = ordered_read('ZMSCORE', p .. 'all_ids_scored_by_retry_count', taken)
  local errs = ordered_read('HMGET', p .. 'errors', taken)
  ordered_each('ZREM', sk, taken)
  ordered_each('ZREM', p .. 'all_ids_lex', taken)
  ordered_each('ZREM', p .. 'all_ids_scored_by_perfrom_in', taken)
  ordered_each('ZREM', p .. 'all_ids_scored_by_retry_count', taken)
  local erred = {}
  for i = 1, #taken do
    if errs[i] then erred[#erred + 1] = taken[i] end
  end
  if #erred > 0 then ordered_each('HDEL', p .. 'errors', erred) end
  local at_fields, retry_fields, err_fields = {}, {}, {}
  for i = 1, #taken do
    local id, perform_in, retry, err = taken[i], taken_at[i], retries[i] or '-1', errs[i]
    local pk = p .. 'payloads:' .. id
    -- Reading the payloads first tells a good key (a non-empty sorted set) from bad data, no TYPE.
    -- Numbers as strings: Lua would format each with sprintf.
    local payloads = redis.pcall('ZRANGE', pk, '0', '-1', 'WITHSCORES')
    if type(payloads) == 'table' and not payloads.err and #payloads > 0 then
      redis.call('RENAME', pk, p .. 'processing:payloads:' .. id)
      at_fields[#at_fields + 1], at_fields[#at_fields + 2] = id, perform_in
      retry_fields[#retry_fields + 1], retry_fields[#retry_fields + 2] = id, retry
      if err then
        err_fields[#err_fields + 1], err_fields[#err_fields + 2] = id, err
      end
      out[#out + 1] = {id, retry, perform_in, payloads}
    elseif redis.call('TYPE', pk).ok ~= 'none' then
      ordered_set_aside(p, id, pk, now)
    else
      redis.call('ZADD', p .. 'morgue:all_ids_lex', 0, id)
      redis.call('ZADD', p .. 'morgue:all_ids_scored_by_updated_at', now, id)
      redis.call('HSET', p .. 'morgue:errors', id, 'payloads:' .. id .. ' is missing or empty')
    end
  end
  if #out > 1 then
    ordered_each('HSET', ppi, at_fields)
    ordered_each('HSET', prc, retry_fields)
    if #err_fields > 0 then ordered_each('HSET', perr, err_fields) end
    redis.call('HINCRBY', p .. 'processing_length_by_shard', s, #out - 1)
  end
  return out
end

local function ordered_fetch(leases, paused, ARGV)
  local p, me, mode, batch = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
  if redis.call('SISMEMBER', paused, ARGV[5]) == 1 then
    return {}
  end
  local now = ordered_time()
  local owners = redis.call('HMGET', leases, unpack(ARGV, 6))
  -- The held shards with a due id, in the scheduler's order: listed order for seq, oldest due id first
  -- (listed order among equals) for lag. The first one that yields an id not already in processing is
  -- taken from, so a shard whose due ids are all running (pushed again while they run) does not
  -- hold up the others.
  local candidates = {}
  for i = 6, #ARGV do
    local s = ARGV[i]
    if owners[i - 5] == me then
      local first = redis.call('ZRANGE', p .. 'ids_scored_by_perform_in:' .. s, '0', '0', 'WITHSCORES')
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
