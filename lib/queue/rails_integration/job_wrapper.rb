# frozen_string_literal: true

require "active_job"

module JobQueue
  module RailsIntegration
    # The class name ActiveJob jobs carry on the wire (Rails' Sidekiq adapter's).
    JOB_WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
  end
end

# Without the sidekiq gem, a server still finds JOB_WRAPPER: ours takes the place of Rails' Sidekiq
# adapter (whose file requires sidekiq) and runs the job as Rails' JobWrapper does. With sidekiq
# loaded first, Rails' own JobWrapper (a Sidekiq::Worker) is left in place and our server runs it.
unless defined?(::Sidekiq)
  if ActiveJob::QueueAdapters.autoload?(:SidekiqAdapter)
    ActiveJob::QueueAdapters.const_set(:SidekiqAdapter, Class.new) # replaces the autoload, loads nothing
  end

  module ActiveJob
    module QueueAdapters
      # Stands in for Rails' :sidekiq adapter when the sidekiq gem is not loaded.
      class SidekiqAdapter
        def enqueue(*)
          raise NotImplementedError, "ActiveJob's :sidekiq adapter needs the sidekiq gem, which is not loaded " \
            "(queue stands in for it to run its jobs); set config.active_job.queue_adapter = :queue"
        end
        alias_method :enqueue_at, :enqueue

        # Runs an ActiveJob job enqueued by either adapter, as Rails' Sidekiq JobWrapper does.
        class JobWrapper
          include JobQueue::Worker

          def perform(job_data)
            ::ActiveJob::Base.execute(job_data.merge("provider_job_id" => jid))
          end
        end
      end
    end
  end
end
