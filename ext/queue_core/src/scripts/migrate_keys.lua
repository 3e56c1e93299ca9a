-- Rename deduplication keys from the old queue's name to the new one, keeping their TTLs (RENAME keeps
-- the expiry). When the new name already holds a key (a job with the same arguments pushed to the new
-- queue), that key stands and the old one is deleted: both jobs now live in the new queue, where only
-- the new key is ever read or cleared.
--
-- KEYS  pairs (old key, new key)
--
-- Returns the number of keys renamed.
local moved = 0
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    if redis.call('EXISTS', KEYS[i + 1]) == 1 then
      redis.call('DEL', KEYS[i])
    else
      redis.call('RENAME', KEYS[i], KEYS[i + 1])
      moved = moved + 1
    end
  end
end
return moved
