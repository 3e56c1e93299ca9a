# frozen_string_literal: true

module JobQueue
  # Fake mode's API on workers, as Sidekiq::Testing has it:
  #
  #   HardWorker.perform_async(1)
  #   HardWorker.jobs             # => [{"class" => "HardWorker", "args" => [1], ...}]
  #   HardWorker.perform_one      # runs the oldest job (Testing::EmptyQueueError if there is none)
  #   HardWorker.drain            # runs jobs until none is left (including jobs the jobs push)
  #   HardWorker.clear
  #   JobQueue::Worker.jobs       # every worker's jobs
  #   JobQueue::Worker.drain_all
  #   JobQueue::Worker.clear_all
  module Worker
    module ClassMethods
      # This worker's fake jobs, oldest first (the live array).
      def jobs
        Testing::FakeQueues.for_class(name)
      end

      # Removes this worker's fake jobs.
      def clear
        Testing::FakeQueues.clear_class(name)
      end

      # Runs this worker's jobs, oldest first, until none is left.
      def drain
        while (job = Testing::FakeQueues.shift(name))
          Testing.execute(job)
        end
      end

      # Runs this worker's oldest job.
      def perform_one
        job = Testing::FakeQueues.shift(name) or raise Testing::EmptyQueueError, "#{name}.perform_one: no job queued"
        Testing.execute(job)
      end
    end

    class << self
      # Every fake job of every worker.
      def jobs
        Testing::FakeQueues.all
      end

      # Removes every fake job, ordered workers' too.
      def clear_all
        Testing::FakeQueues.clear_all
        Testing::Ordered.clear_all
      end

      # Runs every worker's jobs (and the jobs they push) until no fake job is left.
      def drain_all
        while (job = jobs.first)
          Object.const_get(job["class"]).drain
        end
      end
    end
  end
end
