# frozen_string_literal: true

module Sidekiq
  # Sidekiq::Client on JobQueue::Client: `push`, `push_bulk` (class and instance), `enqueue`,
  # `enqueue_to`, `enqueue_in`, `enqueue_to_in`. `Client.via` takes a shard's name
  # (config.redis_shards), not a pool; `Client.new(pool)` raises.
  class Client < JobQueue::Client
    SHARDING = "queue has one Redis per app (`config.redis`); there is no per-client pool"

    def initialize(redis_pool = nil)
      raise ArgumentError, "Sidekiq::Client.new(redis_pool) is not supported: #{SHARDING}" unless redis_pool.nil?

      super()
    end

    class << self
      def enqueue(klass, *args)
        klass.client_push("class" => klass, "args" => args)
      end

      def enqueue_to(queue, klass, *args)
        klass.client_push("queue" => queue.to_s, "class" => klass, "args" => args)
      end

      def enqueue_in(interval, klass, *args)
        klass.perform_in(interval, *args)
      end

      def enqueue_to_in(queue, interval, klass, *args)
        klass.set(queue: queue.to_s).perform_in(interval, *args)
      end

      # Sidekiq Pro's `via(pool)` by shard name: `Sidekiq::Client.via("jobs_b") { ... }`.
      def via(shard, &block)
        return super if shard.is_a?(String) || shard.is_a?(Symbol)

        raise NotImplementedError, "Sidekiq::Client.via(pool) is not supported: give a shard's name from config.redis_shards (README, \"Shards\")"
      end
    end
  end
end
