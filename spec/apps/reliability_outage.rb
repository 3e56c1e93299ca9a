# frozen_string_literal: true

# The Redis-outage test's worker. Like the crash test's, each run adds one to the job's own counter in
# the `runs` hash (in the Redis the server uses), so the spec tells a lost job (no field) from one that
# ran twice (a count of 2). A run takes about a millisecond, so the outage lands in the middle of the
# work rather than after it.
#
# While Redis is down the record fails and the job raises; its failure cannot be filed either, so the
# engine keeps the job in its working list and puts it back on its queue once Redis answers again. A
# failure that is filed (Redis came back in between) is retried at once rather than in Sidekiq's 15 s.
require_relative "basic"

# One job per fetch: every job costs its thread a fetch round trip, so when Redis stops, fetches are
# in flight, and some have run in Redis without their reply ever coming back.
JobQueue.configure { |c| c.max_batch = 1 }

class ReliabilityOutageWorker
  include JobQueue::Worker

  sidekiq_retry_in { 0 }

  def perform(id)
    sleep 0.001
    Record.redis.hincrby("runs", id.to_s, 1)
  rescue Redis::BaseConnectionError => e
    # Said in the log, which the spec reads: with Redis down the failure is never filed, so no error
    # handler hears of it.
    JobQueue.config.logger.warn("outage worker: job #{id} could not record its run (#{e.class})")
    raise
  end
end
