-- Ordered jobs: helpers shared by the settle, fetch, recover and admin scripts (prepended to each by
-- `ordered::scripts`). `p` is always the queue's key prefix.

-- Sets a value that should be a sorted set but is not (bad data) aside under
-- `morgue:invalid:<its key's suffix>`, and gives the id a morgue entry that says where: bad data is
-- never run and never dropped.
local function ordered_set_aside(p, id, key, now)
  local suffix = string.sub(key, #p + 1)
  redis.call('RENAME', key, p .. 'morgue:invalid:' .. suffix)
  redis.call('ZADD', p .. 'morgue:all_ids_lex', 0, id)
  redis.call('ZADD', p .. 'morgue:all_ids_scored_by_updated_at', now, id)
  redis.call('HSET', p .. 'morgue:errors', id,
    suffix .. ' was not a sorted set; kept as morgue:invalid:' .. suffix)
end

-- Unions the sorted set `from` into `dest` (identical members keep the lowest score) and deletes
-- `from`. If either is not a sorted set, it is set aside first (ordered_set_aside), so the script goes
-- on with what is sound instead of failing half-way.
local function ordered_union(p, id, dest, from, now)
  local done = redis.pcall('ZUNIONSTORE', dest, 2, dest, from, 'AGGREGATE', 'MIN')
  if type(done) == 'table' and done.err then
    for _, key in ipairs({dest, from}) do
      local kind = redis.call('TYPE', key).ok
      if kind ~= 'zset' and kind ~= 'none' then
        ordered_set_aside(p, id, key, now)
      end
    end
    redis.call('ZUNIONSTORE', dest, 2, dest, from, 'AGGREGATE', 'MIN')
  end
  redis.call('DEL', from)
end

-- Queues id `id` of shard `s` again with what it brings back in the sorted set `from` (the payloads it
-- was fetched with, or its morgue entry's): they merge into what was pushed meanwhile, and, when the
-- id has payloads, it is indexed with the given perform_in, retry_count and error (if any).
local function ordered_requeue(p, s, id, from, perform_in, retry, err, now)
  local pk = p .. 'payloads:' .. id
  if redis.call('EXISTS', from) == 1 then
    ordered_union(p, id, pk, from, now)
  end
  if redis.call('EXISTS', pk) == 1 then
    redis.call('ZADD', p .. 'all_ids_lex', 0, id)
    redis.call('ZADD', p .. 'all_ids_scored_by_perfrom_in', perform_in, id)
    redis.call('ZADD', p .. 'all_ids_scored_by_retry_count', retry, id)
    redis.call('ZADD', p .. 'ids_scored_by_perform_in:' .. s, perform_in, id)
    if err then redis.call('HSET', p .. 'errors', id, err) end
  end
end

-- Returns an id taken from shard `s` to the queue unrun, as it was fetched (its processing payloads,
-- perform_in, retry_count and error).
local function ordered_return(p, s, id, perform_in, retry, err, now)
  ordered_requeue(p, s, id, p .. 'processing:payloads:' .. id, perform_in, retry, err, now)
end

-- Runs `cmd key item item ...` over `items` in slices small enough for `unpack` (so a batch of any
-- size is a few commands, not one per item); returns the sum of the integer replies. Slices hold an
-- even number of items, so field-value pairs (HSET) are never split.
local ORDERED_SLICE = 500
local function ordered_each(cmd, key, items)
  local n = 0
  for i = 1, #items, ORDERED_SLICE do
    n = n + redis.call(cmd, key, unpack(items, i, math.min(i + ORDERED_SLICE - 1, #items)))
  end
  return n
end

-- `cmd key item item ...` for a command answering one value per item (HMGET, ZMSCORE), over slices as
-- ordered_each; returns the values in the items' order (false for a missing one).
local function ordered_read(cmd, key, items)
  local out = {}
  for i = 1, #items, ORDERED_SLICE do
    local part = redis.call(cmd, key, unpack(items, i, math.min(i + ORDERED_SLICE - 1, #items)))
    for j = 1, #part do
      out[#out + 1] = part[j]
    end
  end
  return out
end

-- DEL of `keys`, in slices as ordered_each.
local function ordered_del(keys)
  for i = 1, #keys, ORDERED_SLICE do
    redis.call('DEL', unpack(keys, i, math.min(i + ORDERED_SLICE - 1, #keys)))
  end
end

local function ordered_time()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
