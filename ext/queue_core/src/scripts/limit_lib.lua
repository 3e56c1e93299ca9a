-- Helpers of the limit scripts (limits/), prepended to each. Key names are built here from the
-- namespace prefix, spelt as keys.rs spells them: a limit key `lkey` is the worker class or
-- `<class>[<key>]`, and its keys depend on what the script reads (a deferred job's queue, the slots a
-- dead process held).
local function lim_class(lkey)
  return (string.match(lkey, '^[^%[]*'))
end
local function lim_run(prefix, lkey)
  return prefix .. 'jq:limit:run:' .. lkey
end
local function lim_wait(prefix, lkey)
  return prefix .. 'jq:limit:wait:' .. lkey
end
local function lim_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function lim_cap(prefix, lkey)
  return tonumber(redis.call('HGET', prefix .. 'jq:limits', lim_class(lkey))) or 0
end
-- A rate window's leased tokens are one member `#<n>#<identity>#<seq>` of weight n (limits/lease.rs);
-- a job's own start is its jid, of weight 1. `<rate key>:leased` holds the sum of (n - 1).
local function lim_weight(member)
  if string.byte(member, 1) == 35 then
    return tonumber(string.match(member, '^#(%d+)#')) or 1
  end
  return 1
end
-- A deferred job: '<len>:<queue><len>:<jid><job JSON>'.
local function lim_entry(queue, jid, job)
  return #queue .. ':' .. queue .. #jid .. ':' .. jid .. job
end
local function lim_parse(entry)
  local c = string.find(entry, ':', 1, true)
  local n = tonumber(string.sub(entry, 1, c - 1))
  local queue = string.sub(entry, c + 1, c + n)
  local c2 = string.find(entry, ':', c + n + 1, true)
  local m = tonumber(string.sub(entry, c + n + 1, c2 - 1))
  return queue, string.sub(entry, c2 + 1, c2 + m), string.sub(entry, c2 + m + 1)
end
-- Gives a slot back: only if `owner` still holds it (a recovered job may run elsewhere now).
local function lim_free(prefix, lkey, jid, owner)
  local run = lim_run(prefix, lkey)
  if redis.call('HGET', run, jid) == owner then
    redis.call('HDEL', run, jid)
    redis.call('HINCRBY', prefix .. 'jq:limits:running', lim_class(lkey), -1)
  end
end
-- Resumes `lkey`'s deferred jobs, oldest first, while it has free slots: each goes to the right of
-- its queue (it is taken next) with a slot reserved under its jid ('r:<ms>'), so no later job takes
-- the slot before it. Returns how many. (The periodic pump drops `lkey` from the waiting set once it
-- has neither deferred jobs nor reservations.)
local function lim_pump(prefix, lkey, cap, now_ms)
  local run, wait = lim_run(prefix, lkey), lim_wait(prefix, lkey)
  local resumed, back = 0, {}
  while redis.call('HLEN', run) < cap do
    local entry = redis.call('LPOP', wait)
    if not entry then
      break
    end
    local queue, jid, job = lim_parse(entry)
    redis.call('HSET', run, jid, 'r:' .. now_ms)
    resumed = resumed + 1
    back[resumed] = {queue, job}
  end
  -- Newest first, so the oldest ends rightmost: taken first.
  for i = resumed, 1, -1 do
    redis.call('RPUSH', prefix .. 'queue:' .. back[i][1], back[i][2])
    redis.call('SADD', prefix .. 'queues', back[i][1])
  end
  if resumed > 0 then
    local class = lim_class(lkey)
    redis.call('HINCRBY', prefix .. 'jq:limits:running', class, resumed)
    redis.call('HINCRBY', prefix .. 'jq:limits:deferred', class, -resumed)
  end
  return resumed
end
