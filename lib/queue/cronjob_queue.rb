# frozen_string_literal: true

require_relative "application_worker"

module JobQueue
  # For workers run on a schedule (GitLab's CronjobQueue): the queue goes under the `cronjob`
  # namespace, failures are not retried, and the caller's context is not carried into the job (it
  # runs for the whole instance, not for the user or project that happened to enqueue it); the job
  # carries only `meta.caller_id` ("Cronjob" unless the caller set one). Use `with_context` inside
  # `perform` to give the jobs it schedules a context of their own.
  #
  #   class PruneOldEventsWorker
  #     include JobQueue::ApplicationWorker
  #     include JobQueue::CronjobQueue
  #     def perform = ...
  #   end
  #
  #   PruneOldEventsWorker.queue  # => "cronjob:prune_old_events"
  module CronjobQueue
    def self.included(base)
      base.include(ApplicationWorker) unless base.include?(ApplicationWorker)
      base.queue_namespace :cronjob
      base.sidekiq_options retry: false
      base.extend(ClassMethods)
    end

    # Class methods of a cron worker.
    module ClassMethods
      def cronjob_queue? = true
    end
  end
end
