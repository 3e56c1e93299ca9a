# frozen_string_literal: true

require_relative "../queue"
require_relative "api/page"
require_relative "api/job_record"
require_relative "api/sorted_entry"
require_relative "api/queue"
require_relative "api/job_set"
require_relative "api/process_set"
require_relative "api/workers"
require_relative "api/stats"
require_relative "api/ordered_queue"
require_relative "api/idempotency_keys"

module JobQueue
  # The operator's API over queues, job sets, processes and totals, in the shape of Sidekiq's
  # `sidekiq/api` (a script ports by renaming `Sidekiq::` to `JobQueue::`): JobQueue::Queue,
  # ScheduledSet, RetrySet, DeadSet, ProcessSet, Workers, Stats; beyond Sidekiq's, OrderedQueue
  # (shards, lag, owners, morgue) and IdempotencyKeys (deduplication keys held). Every call is one
  # engine call (or a bounded number of them): pages, searches and actions run in Redis, and none reads
  # a whole queue or set into Ruby. See README, "Inspecting from Ruby and the CLI".
  module API
    module_function

    def engine = JobQueue.engine

    # A non-negative Integer, or an ArgumentError naming it.
    def count!(name, value)
      return value if value.is_a?(Integer) && value >= 0

      raise ArgumentError, "#{name} must be a non-negative Integer, got #{value.inspect}"
    end
  end
end
