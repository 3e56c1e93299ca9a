-- Ordered jobs: push a bulk of (id, payload) jobs into one Lowkiq v1 queue (WIRE.md §3).
--
-- Keys are built from the queue's prefix, as Lowkiq does: an id's payload key is only known per id.
-- ARGV[1]  the queue's key prefix (`<namespace>lowkiq:A:v1:<queue>:`)
-- ARGV[2 ..]  groups of 5: id, shard, payload bytes, payload score, perform_in
--
-- Merge rules: payloads union into `payloads:<id>` (identical bytes keep the lowest score: ZADD LT);
-- an id already queued keeps its queued perform_in and retry_count; otherwise the id is queued fresh
-- (retry_count -1). An id in processing is queued like a new one: fetch skips it until it is settled,
-- so its new payloads run after it, never beside it. The morgue is untouched by a push.
-- Returns how many ids were newly queued. Checks every payload key's type before writing anything,
-- so a bulk push applies entirely or not at all.
local p = ARGV[1]
for i = 2, #ARGV, 5 do
  local kind = redis.call('TYPE', p .. 'payloads:' .. ARGV[i]).ok
  if kind ~= 'zset' and kind ~= 'none' then
    return redis.error_reply('ERR ' .. p .. 'payloads:' .. ARGV[i] .. ' is a ' .. kind .. ', not a sorted set')
  end
end
local queued = 0
for i = 2, #ARGV, 5 do
  local id, shard, payload, score, perform_in = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  redis.call('ZADD', p .. 'payloads:' .. id, 'LT', score, payload)
  -- The queue's ids are exactly those of all_ids_scored_by_perfrom_in, so its ZADD NX both tests
  -- whether the id is queued (keeping the queued perform_in) and queues it.
  if redis.call('ZADD', p .. 'all_ids_scored_by_perfrom_in', 'NX', perform_in, id) == 1 then
    redis.call('ZADD', p .. 'all_ids_lex', 0, id)
    redis.call('ZADD', p .. 'all_ids_scored_by_retry_count', -1, id)
    redis.call('ZADD', p .. 'ids_scored_by_perform_in:' .. shard, perform_in, id)
    queued = queued + 1
  end
end
return queued
