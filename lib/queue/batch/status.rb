# frozen_string_literal: true

module JobQueue
  class Batch
    # A batch's state as stored (Sidekiq Pro's `Sidekiq::Batch::Status`). Read once, at `new` (and
    # again by `join`); `exists?` is false for a bid never created or whose data expired.
    class Status
      # One failed job of the batch.
      Failure = Struct.new(:jid, :error_class, :error_message, :at, keyword_init: true)

      attr_reader :bid

      def initialize(bid, config: JobQueue.config)
        @bid = bid.to_s
        @config = config
        reload
      end

      def reload
        @fields, @failed, @dead = @config.engine.batch_status(@bid) || [{}, {}, {}]
        self
      end

      def exists?
        !@fields.empty?
      end

      def total = int("total")
      # Jobs that have not succeeded yet.
      def pending = int("pending")
      # Jobs that failed and have not succeeded since (retrying or dead).
      def failures = @failed.size
      # Jobs that died (dead set, or failed without retries).
      def dead = @dead.size
      def kids = int("kids")
      def description = @fields["description"]
      def callback_queue = @fields["cbq"]
      def parent_bid = @fields["parent"]
      def expires_in = int("expires_in")

      def created_at
        at = @fields["created_at"]
        at && Time.at(at.to_f)
      end

      # Every job has run at least once and every child batch is complete.
      def complete? = @fields.key?("complete_at")
      # Every job succeeded and every child batch succeeded.
      def success? = @fields.key?("success_at")
      def invalidated? = @fields.key?("invalid")

      # Each job that failed and has not succeeded since, with its error.
      def failure_info
        @failed.map { |jid, info| failure(jid, info) }.sort_by { |f| f.at.to_f }
      end

      def dead_info
        @dead.map { |jid, info| failure(jid, info) }.sort_by { |f| f.at.to_f }
      end

      # Events whose callbacks have been queued, with when ({"complete" => Time, ...}).
      def callbacks_fired
        EVENTS.each_with_object({}) do |event, fired|
          at = @fields["#{event}_at"]
          fired[event] = Time.at(at.to_f) if at
        end
      end

      # Events whose callbacks have run.
      def callbacks_done
        EVENTS.select { |event| @fields.key?("#{event}_done") }
      end

      # The registered callbacks: {"success" => [["Class", options], ...], ...}.
      def callbacks
        JSON.parse(@fields["callbacks"] || "{}")
      end

      # Waits until the batch is complete (polling every `interval` seconds); returns self, or nil
      # when `timeout` ran out first.
      def join(timeout: nil, interval: 0.05)
        deadline = timeout && ::Process.clock_gettime(::Process::CLOCK_MONOTONIC) + timeout
        until reload.complete?
          return nil if deadline && ::Process.clock_gettime(::Process::CLOCK_MONOTONIC) >= deadline

          sleep interval
        end
        self
      end

      def data
        {
          "bid" => bid, "total" => total, "pending" => pending, "failures" => failures, "dead" => dead,
          "created_at" => created_at&.to_f, "description" => description, "parent_bid" => parent_bid,
          "complete" => complete?, "success" => success?, "fail_info" => failure_info.map(&:to_h)
        }
      end

      private

      def int(name)
        @fields[name].to_i
      end

      def failure(jid, info)
        parsed = JSON.parse(info)
        Failure.new(jid: jid, error_class: parsed["error_class"], error_message: parsed["error_message"], at: parsed["at"])
      rescue JSON::ParserError
        Failure.new(jid: jid)
      end
    end
  end
end
