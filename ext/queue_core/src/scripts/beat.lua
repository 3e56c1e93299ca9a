-- Liveness beat: record that this process is alive (by the Redis server's clock, so hosts with skewed
-- clocks agree), re-register its working lists, and report which processes stopped beating.
--
-- KEYS[1]  the `alive` sorted set   KEYS[2]  this process's working-list index
-- ARGV[1]  this process's identity ('' to only look)   ARGV[2]  seconds of silence that mean dead
-- ARGV[3 ..]  pairs of (working list key, queue name) this process owns
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
if ARGV[1] ~= '' then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  for i = 3, #ARGV, 2 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
