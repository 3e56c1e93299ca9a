# frozen_string_literal: true

# The app bench/limits.rb runs under our server: the blank job of throughput.rb, with limits by
# BENCH_LIMITS:
#   none   no limits anywhere;
#   other  another worker has a concurrency and a rate limit (the blank job has none): the cost of
#          limits configured in the app for the workers without any (the design target: nothing);
#   own    the blank job itself has a concurrency limit of 1,000 and a rate limit of 10^9 a second,
#          neither binding: the cost of the check, mostly slots and tokens taken in memory from the
#          process's leases (queue_core limits/lease.rs), a script call now and then to renew them.
require_relative "queue_config"
require_relative "blank_counter"

class QueueBlankJob
  include JobQueue::Worker

  if ENV["BENCH_LIMITS"] == "own"
    concurrency_limit 1_000
    rate_limit 1_000_000_000, per: 1
  end

  def perform
    BlankCounter.tick
  end
end

if ENV["BENCH_LIMITS"] == "other"
  class LimitedNeighbourJob
    include JobQueue::Worker
    concurrency_limit 2
    rate_limit 10, per: 1

    def perform; end
  end
end
