-- Batches (batch/mod.rs): the transitions, shared by every batch script. Keys are built from the
-- namespace: <ns>jq:batch:<bid> (hash), <bid>:failed and <bid>:dead (hashes by jid), <bid>:ok (set:
-- the jids of the jobs that succeeded, added by their acks; `okn` in the hash: how many of them are
-- counted), <bid>:done (set: jids counted from the markers of servers of the version before).
-- `unsettled` is pending less failures (jobs that failed and have not succeeded since).
-- A batch fires an event once: HSETNX <event>_at guards the push of its callback job, HSETNX
-- <event>_done the moment its callbacks have run (a batch without callbacks for it is done at once).
local function bkey(ns, bid) return ns .. 'jq:batch:' .. bid end
local function bnum(v) return tonumber(v) or 0 end
local bcheck
local function bdone(ns, bid, k, ev, now)
  if redis.call('HSETNX', k, ev .. '_done', now) == 0 then return end
  if ev == 'death' then return end
  local parent = redis.call('HGET', k, 'parent')
  if ev == 'success' then
    local ttl = bnum(redis.call('HGET', k, 'expires_in'))
    if ttl > 0 then
      redis.call('EXPIRE', k, ttl)
      redis.call('EXPIRE', k .. ':failed', ttl)
      redis.call('EXPIRE', k .. ':dead', ttl)
      -- Done and ok jids only guard against a late duplicate ack (a resend, or a job requeued from a
      -- server taken for dead while it still ran it): a day after success is enough.
      redis.call('EXPIRE', k .. ':done', math.min(ttl, 86400))
      redis.call('EXPIRE', k .. ':ok', math.min(ttl, 86400))
    end
  end
  if parent then
    local pk = bkey(ns, parent)
    if redis.call('EXISTS', pk) == 1 then
      redis.call('HINCRBY', pk, 'kids_' .. ev, 1)
      bcheck(ns, parent, now)
    end
  end
  if ev == 'complete' then bcheck(ns, bid, now) end
end
local function bfire(ns, bid, k, ev, now)
  if redis.call('HSETNX', k, ev .. '_at', now) == 0 then return end
  if redis.call('HEXISTS', k, 'cb_' .. ev) == 0 then return bdone(ns, bid, k, ev, now) end
  local q = redis.call('HGET', k, 'cbq')
  if not q or q == '' then q = 'default' end
  local jid = string.sub(redis.sha1hex(bid .. '/' .. ev), 1, 24)
  local job = '{"class":"JobQueue::Batch::Callback","queue":' .. cjson.encode(q) .. ',"args":[' ..
    cjson.encode(ev) .. ',' .. cjson.encode(bid) .. '],"retry":true,"jid":"' .. jid .. '","created_at":' ..
    now .. ',"enqueued_at":' .. now .. ',"jq_cb":' .. cjson.encode(ev .. ':' .. bid) .. '}'
  redis.call('SADD', ns .. 'queues', q)
  redis.call('LPUSH', ns .. 'queue:' .. q, job)
end
bcheck = function(ns, bid, now)
  local k = bkey(ns, bid)
  local f = redis.call('HMGET', k, 'created_at', 'open', 'invalid', 'pending', 'kids', 'kids_complete', 'kids_success', 'unsettled')
  if not f[1] or bnum(f[2]) > 0 or f[3] then return end
  local pending, kids = bnum(f[4]), bnum(f[5])
  if bnum(f[8]) <= 0 and bnum(f[6]) >= kids then
    bfire(ns, bid, k, 'complete', now)
  end
  if pending <= 0 and bnum(f[7]) >= kids and redis.call('HEXISTS', k, 'complete_done') == 1 then
    bfire(ns, bid, k, 'success', now)
  end
end
-- Jobs of the batch succeeded (or were skipped): each is no longer pending nor failed, counted once.
-- The acks of this version add the job's jid to <bid>:ok, and the checker counts how far it grew
-- (SCARD against `okn`), so a jid added twice counts once. `g` holds what one step learnt of the batch:
--   g.news  acks added jids to <bid>:ok: count them
--   g.q     jids of jobs that failed before (added to <bid>:ok here, and taken off the failures)
--   g.s, g.r  jids from markers of servers of the version before (SADD to <bid>:done decides whether
--           each is new; `s` ones never failed, so they are counted in bulk, `r` ones one by one).
local function bsucceeded_many(ns, bid, g, now)
  local k = bkey(ns, bid)
  if redis.call('EXISTS', k) == 0 then
    -- Its data expired: nothing left to count, and no set kept for a late ack.
    if g.news then redis.call('DEL', k .. ':ok') end
    return
  end
  local gone, unsettled = 0, 0
  local s, r, q = g.s or {}, g.r or {}, g.q or {}
  local done = k .. ':done'
  for i = 1, #s, 1000 do
    local n = redis.call('SADD', done, unpack(s, i, math.min(i + 999, #s)))
    gone, unsettled = gone + n, unsettled + n
  end
  for _, jid in ipairs(r) do
    if redis.call('SADD', done, jid) == 1 then
      gone = gone + 1
      if redis.call('HDEL', k .. ':failed', jid) == 0 then unsettled = unsettled + 1 end
      redis.call('HDEL', k .. ':dead', jid)
    end
  end
  if g.news or #q > 0 then
    local ok = k .. ':ok'
    -- A job that failed before is unsettled no more, whether its jid is new or was added by a late
    -- ack of an earlier copy: counted below with the other new jids, it is taken back here.
    local refailed = 0
    for _, jid in ipairs(q) do
      redis.call('SADD', ok, jid)
      refailed = refailed + redis.call('HDEL', k .. ':failed', jid)
      redis.call('HDEL', k .. ':dead', jid)
    end
    local n = redis.call('SCARD', ok)
    local c = bnum(redis.call('HGET', k, 'okn'))
    -- Fewer than counted: the set expired (a day after success) and a late ack made a new one.
    if n < c then c = 0 end
    if n > c then
      if c == 0 then
        -- A new set lives as long as the batch; a day at most after success.
        local ttl = redis.call('TTL', k)
        if redis.call('HEXISTS', k, 'success_done') == 1 then ttl = math.min(bnum(redis.call('HGET', k, 'expires_in')), 86400) end
        if ttl > 0 then redis.call('EXPIRE', ok, ttl) end
      end
      redis.call('HSET', k, 'okn', n)
      gone, unsettled = gone + n - c, unsettled + n - c
    end
    unsettled = unsettled - refailed
  end
  if gone ~= 0 then redis.call('HINCRBY', k, 'pending', -gone) end
  if unsettled ~= 0 then redis.call('HINCRBY', k, 'unsettled', -unsettled) end
  bcheck(ns, bid, now)
end
-- One job of the batch succeeded outside an ack (a failure whose fate is to be done with it).
local function bsucceeded(ns, bid, jid, now) bsucceeded_many(ns, bid, {q = {jid}}, now) end
-- A callback job ran: `tag` is '<event>:<bid>'.
local function bcallback_ran(ns, tag, now)
  local ev, bid = string.match(tag, '^(%a+):(.+)$')
  if ev then bdone(ns, bid, bkey(ns, bid), ev, now) end
end
