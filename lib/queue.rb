# frozen_string_literal: true

require "json"
require "securerandom"
require "socket"
require "logger"

require_relative "queue/version"
require_relative "queue/errors"
require_relative "queue/native"
require_relative "queue/json_args"
require_relative "queue/timestamp"
require_relative "queue/middleware/chain"
require_relative "queue/logging"
require_relative "queue/capsule"
require_relative "queue/configuration"
require_relative "queue/feature_flags"
require_relative "queue/client"
require_relative "queue/worker"
require_relative "queue/iterable_job"
require_relative "queue/context"
require_relative "queue/job_log"
require_relative "queue/application_worker"
require_relative "queue/cronjob_queue"
require_relative "queue/cron"
require_relative "queue/batch"
require_relative "queue/ordered" # Lowkiq-style ordered workers

# queue: background jobs on Sidekiq's Redis format, run by a Rust engine.
#
# `JobQueue` (not `Queue`, which Ruby already owns as Thread::Queue) is the namespace. Configure it
# once, declare workers with `include JobQueue::Worker`, enqueue with `perform_async`, and run the
# server with `bundle exec queue`.
module JobQueue
  class << self
    # The process-wide configuration.
    def config
      @config ||= Configuration.new
    end

    # Yields the configuration (in clients and servers alike).
    def configure
      yield config
      config
    end

    # Yields the configuration only inside `bundle exec queue`. The block is kept for
    # configure_embed, which runs it too (as Sidekiq 7 does).
    def configure_server(&block)
      (@server_blocks ||= []) << block if block
      yield config if server?
    end

    # A server to run inside another program (a Puma worker; README, "Embedded mode"): concurrency 2
    # unless set here (Sidekiq 7's default: the host's threads share the GVL), then the
    # configure_server blocks seen so far, then this block. Returns a JobQueue::Embedded; call `run`
    # to start it and `stop` to end it.
    def configure_embed
      require_relative "queue/embedded"
      config.concurrency = 2
      @server_blocks&.each { |block| block.call(config) }
      yield config if block_given?
      Embedded.new(config)
    end

    # Yields the configuration everywhere but inside `bundle exec queue`.
    def configure_client
      yield config unless server?
    end

    # True inside `bundle exec queue`.
    def server?
      @server == true
    end

    # @api private
    def server!
      @server = true
    end

    def logger
      config.logger
    end

    # Yields a redis-rb connection to the configured Redis, for the small calls an app makes beside its
    # jobs (as Sidekiq.redis). The `redis` gem is loaded on the first call; see redis_pool.rb.
    def redis(&block)
      config.redis_pool.with(&block)
    end

    def redis_pool
      config.redis_pool
    end

    # Sidekiq 6.4's `strict_args!(mode = :raise)`: what a push does with arguments that would not come
    # back from JSON as they went in (Symbols, Times, Hashes with Symbol keys...). :raise (our
    # default, Sidekiq 7's) raises ArgumentError naming the argument; :warn logs Sidekiq's warning
    # and pushes the JSON form; false pushes it silently. Arguments JSON cannot hold at all (binary
    # Strings, NaN) raise in every mode.
    def strict_args!(mode = :raise)
      config.strict_args = mode
    end

    # The configured engine (Redis connection settings); built on first use.
    def engine
      config.engine
    end

    # Renames a queue: moves the queued, scheduled and retrying jobs of queue `from` to queue `to`,
    # rewriting their "queue" (and a "retry_queue" naming `from`), and renames `from`'s deduplication
    # keys, keeping their TTLs. Each job moves in one atomic step, so it is safe while servers run and
    # clients push. On one shard: "main", or the one a `JobQueue::Client.via` block picked (to move a
    # queue between shards, see move_queue). Returns {"queued" => n, "scheduled" => n, "retry" => n,
    # "keys" => n}.
    def migrate_queue(from, to)
      engine.migrate_queue(from.to_s, to.to_s)
    end

    # Moves queue `name` from shard `from` to shard `to` (config.redis_shards): its queued, scheduled
    # and retrying jobs and its deduplication keys, batch by batch, none lost or doubled, while
    # servers run and clients push (README, "Shards"). Switch the queue's pushes to `to` first (the
    # worker's `store`); what reaches `from` after the last batch stays there. Returns
    # {"queued" => n, "scheduled" => n, "retry" => n, "keys" => n}.
    def move_queue(name, from:, to:)
      from = config.shards.check!(from)
      to = config.shards.check!(to)
      raise ArgumentError, "move_queue: #{name} is on shard #{from} already (from: and to: are the same)" if from == to

      config.shard_engine(from).move_queue_to(config.shard_engine(to), name.to_s)
    end

    # Totals, as Sidekiq::Stats reports them: processed, failed, enqueued, sizes of the sets.
    # With several shards, every shard's added up (JobQueue::Stats.combine), or the `via` block's.
    def stats
      return engine.stats if Shards.current || !config.shards.many?

      require_relative "queue/api/stats"
      Stats.combine(config.shards.names.map { |name| config.shard_engine(name).stats })
    end
  end
end

# Rails apps get the Railtie; any app with ActiveJob loaded gets the :queue adapter.
require_relative "queue/railtie" if defined?(::Rails::Railtie)
require_relative "active_job/queue_adapters/queue_adapter" if defined?(::ActiveJob) && !defined?(::Rails::Railtie)
