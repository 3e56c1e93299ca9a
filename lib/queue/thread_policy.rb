# frozen_string_literal: true

module JobQueue
  # A server's job threads under Linux's SCHED_BATCH (config.job_thread_policy): a job thread that
  # wakes up waits for a core instead of preempting a running thread, which is most often the one
  # holding the GVL it would wait for anyway. Each processor thread applies it to itself as it starts
  # (ext/queue_core/src/thread_policy.rs; ARCHITECTURE.md, "Job threads under SCHED_BATCH").
  module ThreadPolicy
    @refusal_logged = false
    @lock = Mutex.new

    class << self
      # Applies `policy` (:batch or nil) to the calling thread. Returns the thread's policy after
      # ("batch", or the one it was started under and keeps), or nil when there was nothing to do. A
      # kernel that refuses is logged once a process; the thread runs on under its policy.
      def apply(policy, logger)
        return nil unless policy == :batch

        Native.batch_current_thread
      rescue Error => e
        log_refusal(logger, e)
        nil
      end

      private

      def log_refusal(logger, error)
        first = @lock.synchronize { !@refusal_logged && (@refusal_logged = true) }
        logger.warn("job threads keep their scheduling policy (job_thread_policy :batch not applied): #{error.message}") if first
      end
    end
  end
end
