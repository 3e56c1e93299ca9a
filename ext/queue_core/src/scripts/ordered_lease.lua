-- Ordered jobs: shard leases of one queue. A lease is a field of KEYS[1] (shard -> owner identity);
-- it is valid while its owner beats in KEYS[2], the queue's members (identity -> this server's TIME of
-- its last beat, the clock `jq:alive` uses), so it is renewed by every beat and lapses DEAD_AFTER
-- seconds after its owner falls silent. A member silent that long is pruned.
--
-- KEYS[1]  the queue's lease hash   KEYS[2]  the queue's members   KEYS[3]  processing_length_by_shard
-- ARGV[1]  this process's identity   ARGV[2]  seconds of silence that mean dead
-- ARGV[3]  'look', 'apply' or 'leave'   ARGV[4 ..]  for 'apply': pairs of ('claim' | 'release', shard)
--
-- Every mode beats for ARGV[1] first. 'leave' then releases every lease ARGV[1] holds and removes it
-- from the members. 'look' returns {live members, lease hash as a flat list,
-- processing_length_by_shard as a flat list}. 'apply' claims a shard only if it is free, already ours,
-- or its owner is dead, releases only our own with nothing in processing, and returns the shards it
-- holds afterwards among those named: the caller planned from a snapshot, this re-checks under
-- atomicity.
local me, dead_after, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZADD', KEYS[2], now, me)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - dead_after)
local function alive(who)
  local at = redis.call('ZSCORE', KEYS[2], who)
  return at and tonumber(at) > now - dead_after
end
if mode == 'leave' then
  redis.call('ZREM', KEYS[2], me)
  local flat = redis.call('HGETALL', KEYS[1])
  for i = 1, #flat, 2 do
    if flat[i + 1] == me then redis.call('HDEL', KEYS[1], flat[i]) end
  end
  return {}
end
if mode == 'look' then
  return {
    redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. (now - dead_after), '+inf'),
    redis.call('HGETALL', KEYS[1]),
    redis.call('HGETALL', KEYS[3]),
  }
end
local held = {}
for i = 4, #ARGV, 2 do
  local op, s = ARGV[i], ARGV[i + 1]
  local owner = redis.call('HGET', KEYS[1], s)
  if op == 'claim' then
    if not owner or owner == me or not alive(owner) then
      redis.call('HSET', KEYS[1], s, me)
      held[#held + 1] = s
    end
  elseif op == 'release' then
    -- Only with nothing of the shard in processing: the plan read the in-flight counts before this
    -- call, and a thread of ours may have fetched from the shard since. Released then, the next owner
    -- would recover that id and run it while it still runs here. Kept (returned as held), it drains.
    if owner == me then
      if (tonumber(redis.call('HGET', KEYS[3], s) or '0') or 0) > 0 then
        held[#held + 1] = s
      else
        redis.call('HDEL', KEYS[1], s)
      end
    end
  end
end
return held
