# frozen_string_literal: true

require_relative "ordered/payload_format"
require_relative "ordered/client"

module JobQueue
  # Extend a module (or class) to make it an ordered worker, with Lowkiq's API:
  #
  #   module OrderSyncWorker
  #     extend JobQueue::OrderedWorker
  #     self.shards_count = 24      # default 5; fixed for the queue's life (see the README)
  #     self.batch_size = 10        # ids per perform, default 1
  #     self.max_retry_count = 5    # default 25
  #     payload_format :marshal     # default :json; Marshal is Lowkiq's format, opt-in
  #
  #     def self.retry_in(count) = 10 * (count + 1)
  #
  #     def self.perform(payloads_by_id)   # {id => [payload, ...]}, each id's payloads oldest first
  #       payloads_by_id.each { |id, payloads| payloads.each { |payload| sync(id, payload) } }
  #     end
  #   end
  #
  #   OrderSyncWorker.perform_async([{id: order.id, payload: order.attributes, score: order.version}])
  #
  # Jobs with the same id never run at the same time anywhere; their payloads merge (see the README's
  # "Ordered workers").
  module OrderedWorker
    DEFAULT_SHARDS_COUNT = 5
    DEFAULT_BATCH_SIZE = 1
    DEFAULT_MAX_RETRY_COUNT = 25
    # The engine counts shards and retries in 32 bits.
    LIMIT = 2**31 - 1

    @workers = []
    @lock = Mutex.new

    class << self
      # Every module or class that extended OrderedWorker, in the order they did (the latest of a name).
      def workers
        @lock.synchronize { @workers.dup }
      end

      # A module reloaded in development (a new module of the same name) takes the place of the old one.
      def extended(base)
        super
        @lock.synchronize do
          @workers.reject! { |w| !w.equal?(base) && base.name && w.name == base.name }
          @workers << base unless @workers.include?(base)
        end
      end

      # @api private (specs)
      def forget(worker)
        @lock.synchronize { @workers.delete(worker) }
      end
    end

    def shards_count
      @shards_count || DEFAULT_SHARDS_COUNT
    end

    def shards_count=(count)
      @shards_count = positive!(:shards_count, count)
    end

    def batch_size
      @batch_size || DEFAULT_BATCH_SIZE
    end

    def batch_size=(size)
      @batch_size = positive!(:batch_size, size)
    end

    def max_retry_count
      @max_retry_count || DEFAULT_MAX_RETRY_COUNT
    end

    # How many failures an id's oldest payload survives before it goes to the morgue (0: the first
    # failure sends it there).
    def max_retry_count=(count)
      raise ArgumentError, "#{self}: max_retry_count must be an Integer from 0 to #{LIMIT}, got #{count.inspect}" unless count.is_a?(Integer) && count.between?(0, LIMIT)

      @max_retry_count = count
    end

    # The queue's name in Redis (`lowkiq:A:v1:<queue_name>:…`); the module's name unless set.
    def queue_name
      @queue_name || name || raise(ArgumentError, "#{inspect}: an anonymous ordered worker needs `self.queue_name = ...`")
    end

    def queue_name=(value)
      raise ArgumentError, "#{self}: queue_name must be a non-empty String, got #{value.inspect}" unless (value.is_a?(String) || value.is_a?(Symbol)) && !value.to_s.empty?

      @queue_name = value.to_s
    end

    # The Redis shard (config.redis_shards) this worker's ordered queue lives on: nil (the default)
    # for "main". A `JobQueue::Client.via` block around a push wins, as for other workers.
    attr_reader :store

    def store=(value)
      raise ArgumentError, "#{self}: store must be a shard name, got #{value.inspect}" unless value.nil? || ((value.is_a?(String) || value.is_a?(Symbol)) && value.to_s.match?(Shards::NAME))

      @store = value&.to_s
    end

    # `payload_format :json` (default) or `payload_format :marshal`; without an argument, the format's
    # name.
    def payload_format(format = nil)
      return (@payload_format || Ordered::PayloadFormat::Json).name if format.nil?

      @payload_format = Ordered::PayloadFormat.fetch(format)
      format
    end

    # @api private: the codec of `payload_format`.
    def payload_codec
      @payload_format || Ordered::PayloadFormat::Json
    end

    # Seconds until retry number `count` (0 for the first failure): 15, 16, 31, 96, 271, … plus a
    # random amount, as Lowkiq (and Sidekiq) wait.
    def retry_in(count)
      (count**4) + 15 + (rand(30) * (count + 1))
    end

    # Called with the payloads that just went to the morgue: `[{id:, payloads: [[payload, score]],
    # error:}, …]`.
    def retries_exhausted(batch)
    end

    def perform(payloads_by_id)
      raise NotImplementedError, "#{self} must define self.perform(payloads_by_id)"
    end

    # Queues jobs: `[{id:, payload: "", score: now, perform_in: now}, …]`, in one round trip whatever
    # their number. Override it to compute ids (call `super`). Returns how many ids were not queued
    # before.
    def perform_async(jobs)
      return Ordered::Client.push(self, jobs) if @store.nil? || Shards.current || !JobQueue.config.shards.many?

      Ordered::Client.push(self, jobs, engine: JobQueue.config.shard_engine(@store))
    end

    private

    def positive!(what, value)
      return value if value.is_a?(Integer) && value.between?(1, LIMIT)

      raise ArgumentError, "#{self}: #{what} must be an Integer from 1 to #{LIMIT}, got #{value.inspect}"
    end
  end
end
