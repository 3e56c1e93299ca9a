-- Release an idempotency key by hand (the operator's delete): the key and its side hash go, so the
-- next push of the same job is not a duplicate. With a jid, only while that job still holds the key:
-- a page read before the key was released and taken again by a newer job cannot delete the new one.
--
-- KEYS[1] idempotency key   KEYS[2] its side hash (`<key>:meta`)   ARGV[1] jid, or '' for any holder
-- Returns 1 when the key was held (and is now released), else 0.
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[2])
return redis.call('DEL', KEYS[1])
