-- Take or keep a lease: succeeds if the key is free or already ours, and (re)sets its expiry.
-- KEYS[1]  the lease key   ARGV[1]  our identity   ARGV[2]  lease length in milliseconds
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
