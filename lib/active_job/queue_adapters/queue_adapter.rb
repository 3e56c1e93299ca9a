# frozen_string_literal: true

require "active_job"
require_relative "../../queue"
require_relative "../../queue/rails_integration/job_wrapper"

module ActiveJob
  module QueueAdapters
    # `config.active_job.queue_adapter = :queue`: ActiveJob jobs in Sidekiq's ActiveJob form, as Rails'
    # own :sidekiq adapter writes them (class ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper,
    # "wrapped" the job's class, args [job.serialize]), so our server and Sidekiq run each other's.
    # Sidekiq's `sidekiq_options` on a job class (when the sidekiq gem put them there) apply as there.
    class QueueAdapter
      def enqueue(job)
        push(job, nil)
      end

      def enqueue_at(job, timestamp)
        push(job, timestamp)
      end

      private

      def push(job, at)
        options = job.class.respond_to?(:get_sidekiq_options) ? job.class.get_sidekiq_options.transform_keys(&:to_s) : {}
        item = options.merge(
          "class" => JobQueue::RailsIntegration::JOB_WRAPPER, "wrapped" => job.class.name,
          "queue" => job.queue_name, "args" => [job.serialize]
        )
        item["at"] = at if at
        job.provider_job_id = JobQueue::Client.push(item)
      end
    end
  end
end
