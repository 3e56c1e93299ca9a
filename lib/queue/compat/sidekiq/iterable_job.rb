# frozen_string_literal: true

module Sidekiq
  # Sidekiq 7.3's `include Sidekiq::IterableJob`: a Sidekiq::Job with JobQueue's Iterable
  # (build_enumerator / each_iteration, the `it-<jid>` cursor; README, "Iterable jobs").
  module IterableJob
    def self.included(base)
      raise ArgumentError, "Sidekiq::IterableJob must be included in a class" unless base.is_a?(Class)

      base.include(Sidekiq::Job)
      base.include(JobQueue::Iterable)
    end
  end

  # Sidekiq 7.3's names for the module and its exception (Sidekiq::Job is Sidekiq::Worker here).
  Job::Iterable = JobQueue::Iterable
  Job::Interrupted = JobQueue::Iterable::Interrupted
end
