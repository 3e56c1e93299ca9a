-- A bounded search of a queue (a list) or a sorted set, for the dashboard's filter and for finding a
-- job by jid: reads at most ARGV[3] entries from index ARGV[2] and returns those that contain ARGV[4]
-- (a plain substring of the job's JSON), at most ARGV[5] of them. Work is bounded by the window, never
-- by the size of the key; the caller continues from the index returned.
--
-- KEYS[1]  the list or sorted set
-- ARGV[1]  'list', or 'zset' (read latest first, as Sidekiq lists a sorted set)
-- ARGV[2]  start index   ARGV[3]  window   ARGV[4]  needle   ARGV[5]  most matches to return
-- Returns {next start index or -1 at the end, member, score (zset) or index (list), ...}
local start = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local needle = ARGV[4]
local limit = tonumber(ARGV[5])
local rows, step
if ARGV[1] == 'list' then
  rows = redis.call('LRANGE', KEYS[1], start, start + window - 1)
  step = 1
else
  rows = redis.call('ZRANGE', KEYS[1], start, start + window - 1, 'REV', 'WITHSCORES')
  step = 2
end
local out = {-1}
local found = 0
for i = 1, #rows, step do
  local read = (i - 1) / step + 1
  if string.find(rows[i], needle, 1, true) then
    out[#out + 1] = rows[i]
    if step == 2 then
      out[#out + 1] = rows[i + 1]
    else
      out[#out + 1] = tostring(start + read - 1)
    end
    found = found + 1
    if found >= limit then
      out[1] = start + read
      return out
    end
  end
end
if #rows / step == window then
  out[1] = start + window
end
return out
