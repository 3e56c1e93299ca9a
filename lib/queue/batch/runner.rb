# frozen_string_literal: true

require_relative "validity"

module JobQueue
  class Batch
    # The processor's part for a job carrying "bid" (included in JobQueue::Processor): the worker
    # gets its `bid`; a job of an invalidated batch is skipped (acknowledged without running, which
    # counts it as done); and while it runs, `batch.jobs { }` adds to its batch without holding the
    # batch open (the running job already does).
    module Runner
      private

      def run_in_batch(klass, worker, job, queue)
        bid = job["bid"]
        bid = bid.to_s unless bid.is_a?(String)
        return @fetcher.done unless Validity::SHARED.valid?(@launcher.engine, bid)

        worker.bid = bid if worker.respond_to?(:bid=)
        # Batch.running, inlined: no block per job.
        previous = Thread.current[RUNNING]
        Thread.current[RUNNING] = bid
        begin
          perform_job(klass, worker, job, queue)
        ensure
          Thread.current[RUNNING] = previous
        end
      end
    end
  end
end
