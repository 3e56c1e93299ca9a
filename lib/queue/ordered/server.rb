# frozen_string_literal: true

require_relative "thread_work"

module JobQueue
  module Ordered
    # The ordered side of one server process: the shard leases of every loaded ordered worker (kept
    # by the engine's beat thread), and each processor thread's share of the work (ThreadWork).
    class Server
      # Starts the leases, or returns nil when the app has no ordered worker.
      # `engine`: the shard's engine whose ordered queues this server leases (the launcher's).
      def self.start(config, identity, workers: Ordered.workers, engine: config.engine)
        return nil if workers.empty?

        check_queue_names!(workers)
        queues = workers.map { |w| [w.queue_name, w.shards_count] }
        shards = engine.start_ordered(identity, queues, config.ordered_splitter_spec)
        new(config, shards, workers)
      end

      def self.check_queue_names!(workers)
        workers.group_by(&:queue_name).each do |queue, same|
          raise ArgumentError, "ordered workers #{same.map(&:to_s).join(" and ")} share queue_name #{queue.inspect}" if same.size > 1
        end
      end

      attr_reader :workers

      def initialize(config, shards, workers)
        @config = config
        @shards = shards
        @workers = workers
      end

      # The work of processor thread `index` (its fetchers are made on first use, on that thread).
      def thread_work(index)
        ThreadWork.new(@config, @shards, @workers, index)
      end

      # Summary for the start-up log line.
      def summary
        @workers.map { |w| "#{w.queue_name}(#{@shards.owned(w.queue_name).size}/#{w.shards_count} shards)" }.join(" ")
      end

      # Releases every lease. Call only once no thread runs an ordered batch: another process may take
      # the shards at once and recover what is still in processing.
      def stop
        @shards.stop
      end
    end
  end
end
