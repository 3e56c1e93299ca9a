# frozen_string_literal: true

module JobQueue
  module Testing
    # Prepended to JobQueue::Client: in fake and inline modes, jobs the client middleware let through
    # go to the in-memory queues or run at once instead of being written to Redis. Nothing is dropped
    # as a duplicate there: deduplication lives in Redis, which these modes do not touch.
    module Client
      NOTHING_DROPPED = [].freeze
      private_constant :NOTHING_DROPPED

      private

      def direct_push?
        Testing.disabled? && super
      end

      def raw_push(jobs, worker_class)
        return super if Testing.disabled?

        jobs.each do |job|
          job = Testing.round_trip(job)
          if Testing.fake?
            job["enqueued_at"] = Timestamp.for_job(job, Time.now.to_f) unless job.key?("at")
            FakeQueues.push(job)
          else
            Testing.execute(job)
          end
        end
        NOTHING_DROPPED
      end
    end
  end

  Client.prepend(Testing::Client)
end
