-- Give up a lease if we hold it.  KEYS[1]  the lease key   ARGV[1]  our identity
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
