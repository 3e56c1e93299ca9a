-- May the running job start? Checks its concurrency limit, then its rate limit, and either takes a
-- slot (and a rate token) or moves the job out of the working list: to its limit's deferred list
-- (concurrency; resumed by lim_pump as slots free) or to `schedule` for when the rate allows it. The
-- job's bytes are never changed: a deferral is not a retry.
--
-- KEYS[1]  the working list holding the job   KEYS[2]  the `schedule` set
-- ARGV[1]  namespace prefix   ARGV[2]  the job   ARGV[3]  this process's identity   ARGV[4]  jid
-- ARGV[5]  queue   ARGV[6]  concurrency limit key ('' for none)   ARGV[7]  its limit
-- ARGV[8]  rate kind ('' none, 'window', 'bucket')   ARGV[9]  rate limit key   ARGV[10]  count
-- ARGV[11]  per (seconds)
-- Leases (limits/lease.rs), granted only to a job that runs and only with room to spare:
-- ARGV[12]  concurrency slots wanted (0: none)   ARGV[13]  their fields' prefix (`L:<identity>:`)
-- ARGV[14]  the first field's number   ARGV[15]  rate tokens wanted (0: none)
-- ARGV[16]  how long leased tokens may be used (seconds)   ARGV[17]  a unique name for them
-- Returns {'run', slots leased, tokens leased}, {'deferred'}, {'scheduled', at} or {'gone'} (no
-- longer in the working list: recovered meanwhile; it is back in its queue).
local prefix, job, identity, jid, queue = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lkey, kind = ARGV[6], ARGV[8]
local now_ms = lim_now_ms()
local now = now_ms / 1000
local valid = tonumber(ARGV[16]) or 0
local tokens_leased = 0
local run, class
local slotted = false -- a slot is already ours: reserved for this resumed job (or it was recovered)
if lkey ~= '' then
  local cap = tonumber(ARGV[7])
  class = lim_class(lkey)
  redis.call('HSET', prefix .. 'jq:limits', class, cap)
  run = lim_run(prefix, lkey)
  slotted = redis.call('HEXISTS', run, jid) == 1
  if not slotted then
    local wait = lim_wait(prefix, lkey)
    if redis.call('HLEN', run) >= cap or redis.call('LLEN', wait) > 0 then
      if redis.call('LREM', KEYS[1], -1, job) == 0 then
        return {'gone'}
      end
      redis.call('RPUSH', wait, lim_entry(queue, jid, job))
      redis.call('SADD', prefix .. 'jq:limits:waiting', lkey)
      redis.call('HINCRBY', prefix .. 'jq:limits:deferred', class, 1)
      lim_pump(prefix, lkey, cap, now_ms)
      return {'deferred'}
    end
  end
end
if kind ~= '' then
  local rkey = prefix .. 'jq:limit:rate:' .. ARGV[9]
  local count, per = tonumber(ARGV[10]), tonumber(ARGV[11])
  local at -- a start booked for later
  if kind == 'window' then
    -- Members are jids scored by their (booked) start; a window holds at most `count` of them.
    -- Leased tokens: members of weight n, their extra weight in `xkey`, scored by the end of the
    -- lease (the latest they may start), so the window counts them as starting then.
    local xkey = rkey .. ':leased'
    local extra = tonumber(redis.call('GET', xkey)) or 0
    local had_extra = extra > 0
    local booked = tonumber(redis.call('ZSCORE', rkey, jid))
    if booked and booked > now + 0.001 then
      at = booked -- back before its time (clocks apart): it keeps its booking
    elseif not booked then
      if extra > 0 then
        for _, m in ipairs(redis.call('ZRANGEBYSCORE', rkey, '-inf', now - per)) do
          extra = extra - (lim_weight(m) - 1)
        end
      end
      redis.call('ZREMRANGEBYSCORE', rkey, '-inf', now - per)
      local n = redis.call('ZCARD', rkey) + extra
      if n >= count then
        if extra <= 0 then
          local nth = redis.call('ZRANGE', rkey, n - count, n - count, 'WITHSCORES')
          at = math.max(tonumber(nth[2]) + per, now)
        else
          -- Weighted: the start whose leaving lets the window hold one more, oldest first.
          local need, gone, from, s = n - count + 1, 0, 0, now - per
          while gone < need do
            local page = redis.call('ZRANGE', rkey, from, from + 99, 'WITHSCORES')
            if #page == 0 then
              break
            end
            for i = 1, #page, 2 do
              gone = gone + lim_weight(page[i])
              s = tonumber(page[i + 1])
              if gone >= need then
                break
              end
            end
            from = from + 100
          end
          at = math.max(s + per, now)
        end
      else
        at = now
      end
      redis.call('ZADD', rkey, at, jid)
      if at <= now then
        at = nil
        local want = tonumber(ARGV[15]) or 0
        if want > 1 and count - n - 1 >= 4 * want then
          redis.call('ZADD', rkey, now + valid, '#' .. want .. '#' .. ARGV[17])
          extra = extra + want - 1
          tokens_leased = want
        end
      end
    end
    local ttl = math.ceil((per + 1 + valid) * 1000 + (at and (at - now) * 1000 or 0))
    if redis.call('PTTL', rkey) < ttl then
      redis.call('PEXPIRE', rkey, ttl)
    end
    if extra > 0 then
      redis.call('SET', xkey, extra, 'PX', math.max(ttl, redis.call('PTTL', rkey)))
    elseif had_extra then
      redis.call('DEL', xkey)
    end
  else
    -- A bucket of `count` tokens refilled at count/per a second; a job that finds it empty books
    -- the token it will have (tokens go below zero) and runs when it comes.
    local booked = tonumber(redis.call('HGET', rkey, 'b:' .. jid))
    if booked and booked <= now + 0.001 then
      redis.call('HDEL', rkey, 'b:' .. jid)
    elseif booked then
      at = booked -- back before its time (clocks apart): it keeps its booking
    else
      -- `at`: refilled up to then. A lease moves it to the lease's end, so the bucket earns nothing
      -- while leased tokens may still be spent.
      local state = redis.call('HMGET', rkey, 'tokens', 'at')
      local tokens = tonumber(state[1]) or count
      local last = tonumber(state[2]) or now
      tokens = math.min(count, tokens + math.max(0, now - last) * count / per) - 1
      local upto = math.max(now, last)
      local want = tonumber(ARGV[15]) or 0
      if tokens >= 0 and want > 1 and tokens >= 4 * want then
        tokens = tokens - want
        upto = math.max(upto, now + valid)
        tokens_leased = want
      end
      redis.call('HSET', rkey, 'tokens', tostring(tokens), 'at', tostring(upto))
      if tokens < 0 then
        at = upto + (-tokens) * per / count -- the bucket earns nothing before `upto`
        redis.call('HSET', rkey, 'b:' .. jid, tostring(at))
      end
    end
    local ttl = math.ceil((per + 1 + valid) * 1000 + (at and (at - now) * 1000 or 0))
    if redis.call('PTTL', rkey) < ttl then
      redis.call('PEXPIRE', rkey, ttl)
    end
  end
  if at then
    if redis.call('LREM', KEYS[1], -1, job) == 0 then
      return {'gone'}
    end
    local score = string.format('%.3f', at + 0.001)
    redis.call('ZADD', KEYS[2], score, job)
    if slotted then
      -- A resumed job's reserved slot goes to the next deferred job.
      local owner = redis.call('HGET', run, jid)
      lim_free(prefix, lkey, jid, owner)
      lim_pump(prefix, lkey, tonumber(ARGV[7]), now_ms)
    end
    return {'scheduled', score}
  end
end
local slots_leased = 0
if lkey ~= '' then
  if not slotted then
    redis.call('HINCRBY', prefix .. 'jq:limits:running', class, 1)
  end
  local held = prefix .. 'jq:limit:held:' .. identity
  redis.call('HSET', run, jid, identity)
  redis.call('SADD', held, jid .. ' ' .. lkey)
  -- A lease: only while nothing waits and half the free slots stay free after it.
  local want = tonumber(ARGV[12]) or 0
  if want > 0 and tonumber(ARGV[7]) - redis.call('HLEN', run) >= 2 * want
      and redis.call('LLEN', lim_wait(prefix, lkey)) == 0 then
    local first = tonumber(ARGV[14])
    for i = 0, want - 1 do
      local field = ARGV[13] .. (first + i)
      redis.call('HSET', run, field, identity)
      redis.call('SADD', held, field .. ' ' .. lkey)
    end
    redis.call('HINCRBY', prefix .. 'jq:limits:running', class, want)
    slots_leased = want
  end
end
return {'run', slots_leased, tokens_leased}
