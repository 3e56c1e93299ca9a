-- Acknowledge a finished job that belongs to a batch (or is a batch's callback), and count it in the
-- same step: only if the LREM took it, so an ack written twice counts once. Sent unreplied as EVAL.
-- KEYS[1] the working list   ARGV[1] the job   ARGV[2] namespace   ARGV[3] bid or ''
-- ARGV[4] jid   ARGV[5] '<event>:<bid>' of a callback job, or ''   ARGV[6] now (epoch seconds)
if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 0 then return 0 end
if ARGV[3] ~= '' then bsucceeded(ARGV[2], ARGV[3], ARGV[4], ARGV[6]) end
if ARGV[5] ~= '' then bcallback_ran(ARGV[2], ARGV[5], ARGV[6]) end
return 1
