# frozen_string_literal: true

require "date"

module JobQueue
  # Totals (Sidekiq's `Stats`), read in two round trips when built: processed, failed, the sizes of the
  # sets, jobs enqueued and running, the default queue's latency, and each queue's size.
  class Stats
    # `shard:` one shard's figures; by default those of every shard added up (or the shard a
    # `JobQueue::Client.via` block picked).
    def initialize(shard: nil)
      @shards = shard ? [API.shard_for(shard)] : API.shards
      @stats = Stats.combine(@shards.map { |name| API.engine(name).stats })
    end

    # Several shards' stats as one: counts and sizes added, queues merged, the default queue's
    # latency the largest.
    def self.combine(all)
      return all.first if all.size == 1

      all.reduce do |sum, stats|
        sum.to_h do |key, value|
          other = stats[key]
          merged =
            case key
            when "queues" then value.merge(other) { |_, a, b| a + b }
            when "default_queue_latency" then [value, other].max
            else value + other
            end
          [key, merged]
        end
      end
    end

    %w[processed failed expired scheduled_size retry_size dead_size enqueued processes_size workers_size
      default_queue_latency].each do |stat|
      define_method(stat) { @stats.fetch(stat) }
    end

    # Each queue's size, largest first (Sidekiq's order).
    def queues = @stats.fetch("queues").sort_by { |_, size| -size }.to_h

    # Sets the total counters to 0: both, or those named (`reset("failed")`). Daily counts stay.
    def reset(*stats)
      all = %w[failed processed]
      names = stats.empty? ? all : all & stats.flatten.compact.map(&:to_s)
      @shards.each { |shard| API.engine(shard).api_stats_reset(names) }
    end

    # Each queue's size, largest first.
    class Queues
      def lengths = Stats.new.queues
    end

    # Daily counts for the `days_previous` days up to `start_date` (today, UTC, by default):
    # `History.new(7).processed # => {"2026-05-04" => 120, "2026-05-03" => 98, …}`, newest first.
    class History
      MAX_DAYS = 5 * 365

      def initialize(days_previous, start_date = nil)
        unless days_previous.is_a?(Integer) && days_previous.between?(1, MAX_DAYS)
          raise ArgumentError, "days_previous must be an Integer from 1 to #{MAX_DAYS}, got #{days_previous.inspect}"
        end

        @days_previous = days_previous
        @start_date = start_date || Time.now.utc.to_date
      end

      def processed = @processed ||= counts("processed")

      def failed = @failed ||= counts("failed")

      private

      def counts(stat)
        dates = @start_date.downto(@start_date - @days_previous + 1).map { |d| d.strftime("%Y-%m-%d") }
        counts = API.shards.map { |shard| API.engine(shard).api_history(stat, dates) }.transpose.map(&:sum)
        dates.zip(counts).to_h
      end
    end
  end
end
