# frozen_string_literal: true

module JobQueue
  # Test modes (see lib/queue/testing.rb) and a private redis-server for tests (Testing::RedisServer).
  module Testing
    MODES = %i[disable fake inline].freeze

    # Raised by `perform_one` when the worker has no fake job.
    class EmptyQueueError < RuntimeError; end

    @mode = :disable

    class << self
      # :disable, :fake or :inline.
      attr_reader :mode

      # Pushes go to in-memory arrays (`Worker.jobs`). With a block: only for the block.
      def fake!(&block)
        set_mode(:fake, &block)
      end

      # Pushes run the job at once (after a JSON round trip of the job). With a block: only for it.
      def inline!(&block)
        set_mode(:inline, &block)
      end

      # Pushes go to Redis. With a block: only for the block.
      def disable!(&block)
        set_mode(:disable, &block)
      end

      def fake?
        @mode == :fake
      end

      def inline?
        @mode == :inline
      end

      def disabled?
        @mode == :disable
      end

      def enabled?
        !disabled?
      end

      # Runs a job hash as a server would: a new worker instance with its jid, inside the configured
      # server middleware. Exceptions are the caller's (no retry in tests).
      def execute(job)
        worker = Object.const_get(job["class"]).new
        worker.jid = job["jid"] if worker.respond_to?(:jid=)
        JobQueue.config.server_middleware_chain.invoke(worker, job, job["queue"]) do
          worker.perform(*job["args"])
        end
      end

      # A job as a server would read it back: through JSON, so symbols become strings and a test sees
      # what production would.
      def round_trip(job)
        JSON.parse(JSON.generate(job))
      end

      private

      def set_mode(mode)
        raise ArgumentError, "unknown test mode #{mode.inspect}; use one of #{MODES.inspect}" unless MODES.include?(mode)
        return @mode = mode unless block_given?

        previous = @mode
        begin
          @mode = mode
          yield
        ensure
          @mode = previous
        end
      end
    end
  end
end
