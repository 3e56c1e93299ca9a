-- The `jobs` block that held a batch open ended: let it go, and fire what it now completes.
-- ARGV[1] namespace   ARGV[2] bid   ARGV[3] now
local k = bkey(ARGV[1], ARGV[2])
if redis.call('EXISTS', k) == 0 then return 0 end
redis.call('HINCRBY', k, 'open', -1)
bcheck(ARGV[1], ARGV[2], ARGV[3])
return 1
