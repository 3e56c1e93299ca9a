-- The checker's step (batch/checker.rs): take up to ARGV[3] markers left by batch_ack.lua and apply
-- each in this same step: 'c <bid>' runs the batch's transitions, 'd <event>:<bid>' records that the
-- event's callbacks ran. Returns how many it took.
-- KEYS[1] the checks list   ARGV[1] namespace   ARGV[2] now   ARGV[3] most markers
local n = 0
while n < tonumber(ARGV[3]) do
  local m = redis.call('RPOP', KEYS[1])
  if not m then break end
  n = n + 1
  local rest = string.sub(m, 3)
  if string.sub(m, 1, 1) == 'c' then bcheck(ARGV[1], rest, ARGV[2]) else bcallback_ran(ARGV[1], rest, ARGV[2]) end
end
return n
