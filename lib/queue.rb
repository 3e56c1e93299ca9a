# frozen_string_literal: true

require "json"
require "securerandom"
require "socket"
require "logger"

require_relative "queue/version"
require_relative "queue/errors"
require_relative "queue/native"
require_relative "queue/json_args"
require_relative "queue/middleware/chain"
require_relative "queue/configuration"
require_relative "queue/client"
require_relative "queue/worker"

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

    # Yields the configuration only inside `bundle exec queue`.
    def configure_server
      yield config if server?
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

    # The configured engine (Redis connection settings); built on first use.
    def engine
      config.engine
    end

    # Totals, as Sidekiq::Stats reports them: processed, failed, enqueued, sizes of the sets.
    def stats
      engine.stats
    end
  end
end
