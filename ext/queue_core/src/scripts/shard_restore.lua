-- Moving a queue to another shard (shard_move/), on the shard it goes to: restore one deduplication
-- key from its DUMP with what is left of its TTL, unless this shard holds a key of that name already
-- (a job with the same arguments pushed here): that one stands.
--
-- KEYS[1]  the key   ARGV[1]  TTL in milliseconds (0: none)   ARGV[2]  the DUMP payload
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('RESTORE', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
return 0
