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

    # The engine of shard `shard` (a name), else of the shard a `JobQueue::Client.via` block picked,
    # else of "main".
    def engine(shard = nil) = shard ? JobQueue.config.shard_engine(shard) : JobQueue.engine

    # The shards a view over "every shard" reads: the one a `via` block picked, else all of them
    # ("main" first; only "main" without config.redis_shards).
    def shards = Shards.current ? [Shards.current] : JobQueue.config.shards.names

    # The shard an object made now belongs to: `given` (checked), else the `via` block's, else "main".
    def shard_for(given) = given ? JobQueue.config.shards.check!(given) : (Shards.current || Shards::MAIN)

    # A non-negative Integer, or an ArgumentError naming it.
    def count!(name, value)
      return value if value.is_a?(Integer) && value >= 0

      raise ArgumentError, "#{name} must be a non-negative Integer, got #{value.inspect}"
    end
  end
end
