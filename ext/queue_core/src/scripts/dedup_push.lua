-- Push jobs of one worker class onto one queue (or the schedule), deduplicated: each job takes its
-- idempotency key with SET NX EX; a job that finds the key held is a duplicate of the holder's jid.
-- A duplicate of an idempotent worker is dropped (unless the queue's flag turns dropping off), its
-- newer replication positions kept beside the key; any other duplicate is pushed, marked
-- "duplicate-of". The job JSON is never decoded here: the mark is spliced before its closing brace.
--
-- KEYS[1] queues   KEYS[2] the queue   KEYS[3] schedule   KEYS[4] feature flags (HASH)
-- KEYS[5] metrics counters (HASH)
-- KEYS[4 + 2j], KEYS[5 + 2j]  job j's idempotency key and its side hash
-- ARGV[1] queue name   ARGV[2] flag field to read ('' = do not read)   ARGV[3] '1' = drop duplicates
-- ARGV[4] '1' = record drops (for reschedule_once)   ARGV[5] the drops' field in KEYS[5]
-- then per job: jid, ttl (seconds), run-at ('' = now), job JSON, n, then n (name, position) pairs
-- Returns one string per job: '' pushed, 'm<jid>' pushed marked duplicate of jid, 'd<jid>' dropped.
-- Whether duplicates are dropped, read (the flag included) only once a duplicate is found: a push
-- that takes its key never needs it.
local drop
local function dropping()
  if drop == nil then
    drop = ARGV[3] == '1'
    if drop and ARGV[2] ~= '' then
      local off = redis.call('HGET', KEYS[4], ARGV[2])
      if off and off ~= '0' and off ~= 'false' and off ~= '' then
        drop = false
      end
    end
  end
  return drop
end
local out = {}
local a = 6
local pushed = false
local dropped = 0
for j = 1, (#KEYS - 5) / 2 do
  local key, meta = KEYS[4 + 2 * j], KEYS[5 + 2 * j]
  local jid, ttl, at, job, n = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4])
  local status = ''
  if not redis.call('SET', key, jid, 'NX', 'EX', ttl) then
    local holder = redis.call('GET', key)
    if dropping() then
      local touched = false
      if ARGV[4] == '1' then
        redis.call('HSET', meta, 'dropped', '1')
        touched = true
      end
      for i = 0, n - 1 do
        local name, pos = 'wal:' .. ARGV[a + 5 + 2 * i], ARGV[a + 6 + 2 * i]
        if dedup_newer(pos, redis.call('HGET', meta, name)) then
          redis.call('HSET', meta, name, pos)
          touched = true
        end
      end
      if touched then
        local left = redis.call('PTTL', key)
        if left > 0 then
          redis.call('PEXPIRE', meta, left)
        end
      end
      status = 'd' .. holder
      dropped = dropped + 1
    else
      if string.match(holder, '^[%w_%-]+$') then
        job = string.sub(job, 1, -2) .. ',"duplicate-of":"' .. holder .. '"}'
      end
      status = 'm' .. holder
    end
  end
  if string.sub(status, 1, 1) ~= 'd' then
    if at == '' then
      redis.call('LPUSH', KEYS[2], job)
      pushed = true
    else
      redis.call('ZADD', KEYS[3], at, job)
    end
  end
  out[j] = status
  a = a + 5 + 2 * n
end
if pushed then
  redis.call('SADD', KEYS[1], ARGV[1])
end
if dropped > 0 then
  redis.call('HINCRBY', KEYS[5], ARGV[5], dropped)
end
return out
