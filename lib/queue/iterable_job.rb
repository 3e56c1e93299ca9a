# frozen_string_literal: true

require_relative "worker"
require_relative "iterable"

module JobQueue
  # Sidekiq 7.3's IterableJob: a worker whose work is a sequence, processed one item at a time and
  # resumable from a cursor after a deploy (README, "Iterable jobs").
  #
  #   class NotifyUsers
  #     include JobQueue::IterableJob
  #
  #     def build_enumerator(org_id, cursor:)
  #       active_record_records_enumerator(User.where(org_id: org_id), cursor: cursor)
  #     end
  #
  #     def each_iteration(user, org_id)
  #       user.notify!
  #     end
  #   end
  module IterableJob
    def self.included(base)
      raise ArgumentError, "JobQueue::IterableJob must be included in a class" unless base.is_a?(Class)

      base.include(JobQueue::Worker)
      base.include(JobQueue::Iterable)
    end
  end
end
