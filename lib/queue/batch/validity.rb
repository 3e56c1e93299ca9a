# frozen_string_literal: true

module JobQueue
  class Batch
    # Whether a batch is valid (not invalidated), as the processor threads of one server see it: one
    # read per batch and engine a second (`TTL`), shared by every thread, not one per job or thread.
    # A batch whose data expired reads valid, so its late jobs still run.
    class Validity
      TTL = 1.0
      # Batches remembered at most; the oldest is forgotten first.
      LIMIT = 1000

      def initialize
        @entries = {}
        @lock = Mutex.new
      end

      def valid?(engine, bid)
        now = ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
        entry = @entries[bid]
        return entry[0] if entry && entry[2].equal?(engine) && now - entry[1] < TTL

        valid = engine.batch_valid(bid) # the shard this server serves, where its jobs' batches are
        @lock.synchronize do
          @entries.delete(bid)
          @entries.shift if @entries.size >= LIMIT
          @entries[bid] = [valid, now, engine].freeze
        end
        valid
      end

      # The one a server's processors share.
      SHARED = new
    end
  end
end
