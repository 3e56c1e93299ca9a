-- Prelude of fail.lua for a job of a batch (scripts.rs appends fail.lua's text): before fail.lua
-- takes the job from its working list, the batch records the failure, in the same script. Only if
-- the working list still holds the job, so a failure filed twice counts once.
-- ARGV[#ARGV]  JSON {ns, bid, jid, fate: retry|dead|drop|ok, class, message, at}
do
  local b = cjson.decode(ARGV[#ARGV])
  if redis.call('LPOS', KEYS[1], ARGV[1], 'RANK', -1) then
    local k = bkey(b.ns, b.bid)
    if b.fate == 'ok' then
      bsucceeded(b.ns, b.bid, b.jid, b.at)
    elseif redis.call('EXISTS', k) == 1 then
      local info = cjson.encode({jid = b.jid, error_class = b.class, error_message = b.message, at = tonumber(b.at)})
      if redis.call('HSET', k .. ':failed', b.jid, info) == 1 then redis.call('HINCRBY', k, 'unsettled', -1) end
      local ttl = bnum(redis.call('HGET', k, 'expires_in'))
      if ttl > 0 then redis.call('EXPIRE', k .. ':failed', ttl) end
      if b.fate ~= 'retry' then
        redis.call('HSET', k .. ':dead', b.jid, info)
        if ttl > 0 then redis.call('EXPIRE', k .. ':dead', ttl) end
        if not redis.call('HGET', k, 'invalid') then bfire(b.ns, b.bid, k, 'death', b.at) end
      end
      bcheck(b.ns, b.bid, b.at)
    end
  end
  if b.cb ~= '' and b.fate == 'ok' then bcallback_ran(b.ns, b.cb, b.at) end
end
