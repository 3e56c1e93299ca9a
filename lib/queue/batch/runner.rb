# frozen_string_literal: true

module JobQueue
  class Batch
    # The processor's part for a job carrying "bid" (included in JobQueue::Processor): the worker
    # gets its `bid`; a job of an invalidated batch is skipped (acknowledged without running, which
    # counts it as done); and while it runs, `batch.jobs { }` adds to its batch without holding the
    # batch open (the running job already does).
    module Runner
      # How long a batch's validity is trusted before it is read again, per processor thread: one
      # read per batch per second, not one per job.
      VALIDITY_TTL = 1.0

      private

      def run_in_batch(klass, worker, job, queue)
        bid = job["bid"].to_s
        return @fetcher.done unless batch_valid?(bid)

        worker.bid = bid if worker.respond_to?(:bid=)
        Batch.running(bid) { perform_job(klass, worker, job, queue) }
      end

      def batch_valid?(bid)
        @batch_validity ||= {}
        now = ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
        valid, at = @batch_validity[bid]
        return valid if at && now - at < VALIDITY_TTL

        @batch_validity.shift if @batch_validity.size >= 1000
        valid = @launcher.engine.batch_valid(bid) # the shard this server serves, where its jobs' batches are
        @batch_validity[bid] = [valid, now]
        valid
      end
    end
  end
end
