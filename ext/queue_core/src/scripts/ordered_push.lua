-- Ordered jobs: push a bulk of (id, payload) jobs into one Lowkiq v1 queue (WIRE.md §3).
--
-- Keys are built from the queue's prefix, as Lowkiq does: an id's payload key is only known per id.
-- ARGV[1]  the queue's key prefix (`<namespace>lowkiq:A:v1:<queue>:`)
-- ARGV[2 ..]  groups of 5: id, shard, payload bytes, payload score, perform_in
--
-- Merge rules: payloads union into `payloads:<id>` (identical bytes keep the lowest score: ZADD LT);
-- an id already queued keeps its queued perform_in and retry_count; otherwise the id is queued fresh
-- (retry_count -1) with the perform_in of its first job in the bulk. An id in processing is queued
-- like a new one: fetch skips it until it is settled, so its new payloads run after it, never beside
-- it. The morgue is untouched by a push.
-- Returns how many ids were newly queued. Checks every payload key's type before writing anything,
-- so a bulk push applies entirely or not at all. The index writes are one command per key for the
-- whole bulk (ordered_each), so a bulk costs one payload write per job plus a few commands.
local p = ARGV[1]
local ids, first = {}, {}
for i = 2, #ARGV, 5 do
  local id = ARGV[i]
  if not first[id] then
    first[id] = i
    ids[#ids + 1] = id
    local kind = redis.call('TYPE', p .. 'payloads:' .. id).ok
    if kind ~= 'zset' and kind ~= 'none' then
      return redis.error_reply('ERR ' .. p .. 'payloads:' .. id .. ' is a ' .. kind .. ', not a sorted set')
    end
  end
end
for i = 2, #ARGV, 5 do
  redis.call('ZADD', p .. 'payloads:' .. ARGV[i], 'LT', ARGV[i + 3], ARGV[i + 2])
end
-- The queue's ids are exactly those of all_ids_scored_by_perfrom_in.
local queued = ordered_read('ZMSCORE', p .. 'all_ids_scored_by_perfrom_in', ids)
local at, lex, retry, by_shard, shards = {}, {}, {}, {}, {}
for n = 1, #ids do
  if not queued[n] then
    local i = first[ids[n]]
    local id, shard, perform_in = ARGV[i], ARGV[i + 1], ARGV[i + 4]
    at[#at + 1], at[#at + 2] = perform_in, id
    -- Numbers as strings: Lua would format each with sprintf.
    lex[#lex + 1], lex[#lex + 2] = '0', id
    retry[#retry + 1], retry[#retry + 2] = '-1', id
    if not by_shard[shard] then
      by_shard[shard] = {}
      shards[#shards + 1] = shard
    end
    local list = by_shard[shard]
    list[#list + 1], list[#list + 2] = perform_in, id
  end
end
if #at == 0 then
  return 0
end
ordered_each('ZADD', p .. 'all_ids_scored_by_perfrom_in', at)
ordered_each('ZADD', p .. 'all_ids_lex', lex)
ordered_each('ZADD', p .. 'all_ids_scored_by_retry_count', retry)
for _, shard in ipairs(shards) do
  ordered_each('ZADD', p .. 'ids_scored_by_perform_in:' .. shard, by_shard[shard])
end
return #at / 2
