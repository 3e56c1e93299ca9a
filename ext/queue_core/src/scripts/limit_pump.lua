-- The periodic pump (every liveness beat, and after limits are published): for each limit with
-- deferred jobs, drops reservations older than ARGV[2] ms (a resumed job deleted or lost before it
-- was taken; a dead process's job that never came back), then resumes deferred jobs into free slots (a limit that rose, 0 included).
-- ARGV[1]  namespace prefix   ARGV[2]  reservation lifetime (ms). Returns the jobs resumed.
local prefix, ttl = ARGV[1], tonumber(ARGV[2])
local now_ms = lim_now_ms()
local resumed = 0
for _, lkey in ipairs(redis.call('SMEMBERS', prefix .. 'jq:limits:waiting')) do
  local run = lim_run(prefix, lkey)
  local slots = redis.call('HGETALL', run)
  local reserved = false
  for i = 1, #slots, 2 do
    local owner = slots[i + 1]
    if string.sub(owner, 1, 2) == 'r:' then
      if tonumber(string.sub(owner, 3)) < now_ms - ttl then
        lim_free(prefix, lkey, slots[i], owner)
      else
        reserved = true
      end
    end
  end
  resumed = resumed + lim_pump(prefix, lkey, lim_cap(prefix, lkey), now_ms)
  if not reserved and redis.call('LLEN', lim_wait(prefix, lkey)) == 0 then
    redis.call('SREM', prefix .. 'jq:limits:waiting', lkey)
  end
end
return resumed
