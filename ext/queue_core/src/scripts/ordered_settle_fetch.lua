-- Ordered jobs: settle a batch and fetch the next one in one round trip, so a worker at batch 1 pays
-- one call per job on top of its push, not two. Appended to the ordered_settle and ordered_fetch
-- library chunks (see `ordered::scripts`).
--
-- KEYS[1]  the queue's lease hash   KEYS[2]  the paused queue names (a paused queue fetches nothing)
-- ARGV[1]  how many of the following arguments are the settle's (0: fetch only)
-- ARGV[2 .. 1 + ARGV[1]]  the settle's arguments, as `ordered_settle.lua` documents them
-- the rest  the fetch's arguments, as `ordered_fetch.lua` documents them
-- Returns {settle reply (or 0 when nothing was settled), fetch reply}.
local n = tonumber(ARGV[1])
local settle_args, fetch_args = {}, {}
for i = 2, n + 1 do
  settle_args[#settle_args + 1] = ARGV[i]
end
for i = n + 2, #ARGV do
  fetch_args[#fetch_args + 1] = ARGV[i]
end
local settled = 0
if n > 0 then
  settled = ordered_settle(KEYS[1], settle_args)
end
return {settled, ordered_fetch(KEYS[1], KEYS[2], fetch_args)}
