-- Deduplication helper, prepended to every script that releases an idempotency key.

-- Releases an idempotency key if the job `jid` still holds it (a newer job's key is left alone),
-- with its side hash. With a job to reschedule (`job` not ''), and a duplicate dropped while the key
-- was held, that job is pushed onto the queue and holds the key in the same step; the newest
-- positions of the side hash stay for it. Returns 0 (not ours), 1 (released) or 2 (rescheduled).
local function dedup_release(key, meta, queue, queues, jid, job, newjid, ttl, qname)
  if jid == '' or redis.call('GET', key) ~= jid then
    return 0
  end
  if job ~= '' and redis.call('HGET', meta, 'dropped') then
    redis.call('SET', key, newjid, 'EX', ttl)
    redis.call('HDEL', meta, 'dropped')
    redis.call('EXPIRE', meta, ttl)
    redis.call('LPUSH', queue, job)
    redis.call('SADD', queues, qname)
    return 2
  end
  redis.call('DEL', key, meta)
  return 1
end
