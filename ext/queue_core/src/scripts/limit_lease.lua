-- A process's lease of concurrency slots (limits/lease.rs), looked at by its lease keeper. The
-- limit is contended while jobs wait (deferred) or resumed jobs hold reservations (it is in
-- `jq:limits:waiting`). While contended, reservations older than ARGV[5] ms are dropped: a resumed
-- job may have run on a leased slot before the process saw the contention, leaving its reservation
-- behind. The unused leased slots ARGV[6..] are given back when contended or when ARGV[4] is '1'
-- (the class went idle here), and deferred jobs resumed into them.
-- ARGV[1]  namespace prefix   ARGV[2]  identity   ARGV[3]  limit key   ARGV[4]  force ('1'/'0')
-- ARGV[5]  reservation lifetime (ms)   ARGV[6..]  the unused leased slots' fields
-- Returns {given back (1/0), contended (1/0)}.
local prefix, identity, lkey, force, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local wait = lim_wait(prefix, lkey)
local contended = redis.call('SISMEMBER', prefix .. 'jq:limits:waiting', lkey) == 1
local freed = 0
if contended then
  local now_ms = lim_now_ms()
  local run = lim_run(prefix, lkey)
  local slots = redis.call('HGETALL', run)
  for i = 1, #slots, 2 do
    local owner = slots[i + 1]
    if string.sub(owner, 1, 2) == 'r:' and tonumber(string.sub(owner, 3)) < now_ms - ttl then
      lim_free(prefix, lkey, slots[i], owner)
      freed = freed + 1
    end
  end
end
local given = 0
if force == '1' or contended then
  local held = prefix .. 'jq:limit:held:' .. identity
  for i = 6, #ARGV do
    lim_free(prefix, lkey, ARGV[i], identity)
    redis.call('SREM', held, ARGV[i] .. ' ' .. lkey)
    freed = freed + 1
  end
  given = 1
end
if freed > 0 and redis.call('LLEN', wait) > 0 then
  lim_pump(prefix, lkey, lim_cap(prefix, lkey), lim_now_ms())
end
return {given, contended and 1 or 0}
