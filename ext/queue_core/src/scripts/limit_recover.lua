-- A dead process's slots (liveness recovery, after its jobs went back to their queues): each slot
-- it still owned becomes a reservation for the same jid, so the recovered job takes it again when it
-- is fetched, ahead of the deferred jobs, as it ran before them. A reservation whose job never
-- comes back (it was acknowledged just before the crash) is freed by the periodic pump. Slots it had
-- leased are freed.
-- ARGV[1]  namespace prefix   ARGV[2]  the dead identity
-- Returns the number of slots handed on.
local prefix, identity = ARGV[1], ARGV[2]
local held = prefix .. 'jq:limit:held:' .. identity
local now_ms = lim_now_ms()
local handed = 0
for _, member in ipairs(redis.call('SMEMBERS', held)) do
  local sp = string.find(member, ' ', 1, true)
  if sp then
    local jid, lkey = string.sub(member, 1, sp - 1), string.sub(member, sp + 1)
    local run = lim_run(prefix, lkey)
    if string.sub(jid, 1, 2) == 'L:' then
      -- A leased slot (limits/lease.rs) is freed: its running job, if any, is back in its queue and
      -- takes a slot again as any job does; the pump resumes deferred jobs into it.
      lim_free(prefix, lkey, jid, identity)
      redis.call('SADD', prefix .. 'jq:limits:waiting', lkey)
      handed = handed + 1
    elseif redis.call('HGET', run, jid) == identity then
      redis.call('HSET', run, jid, 'r:' .. now_ms)
      redis.call('SADD', prefix .. 'jq:limits:waiting', lkey)
      handed = handed + 1
    end
  end
end
redis.call('DEL', held)
return handed
