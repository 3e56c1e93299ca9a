# frozen_string_literal: true

require_relative "../../testing" # JobQueue's test modes; switches to fake mode, as sidekiq/testing does

module Sidekiq
  # Sidekiq::Testing on JobQueue::Testing (README, "Test modes"). One difference: jobs run by
  # inline mode and `drain` go through the configured server middleware, and
  # `Sidekiq::Testing.server_middleware` is that same chain (Sidekiq keeps a separate, empty one).
  class Testing
    class << self
      def fake!(&block) = JobQueue::Testing.fake!(&block)

      def inline!(&block) = JobQueue::Testing.inline!(&block)

      def disable!(&block) = JobQueue::Testing.disable!(&block)

      def enabled? = JobQueue::Testing.enabled?

      def disabled? = JobQueue::Testing.disabled?

      def fake? = JobQueue::Testing.fake?

      def inline? = JobQueue::Testing.inline?

      def server_middleware(&block) = JobQueue.config.server_middleware(&block)

      def constantize(name) = Object.const_get(name)
    end
  end

  EmptyQueueError = JobQueue::Testing::EmptyQueueError

  # Sidekiq::Queues: fake mode's jobs by queue.
  module Queues
    class << self
      def [](queue) = JobQueue::Testing::FakeQueues[queue]

      def jobs_by_queue = JobQueue::Testing::FakeQueues.all.group_by { |job| job["queue"] }

      def jobs_by_worker = JobQueue::Testing::FakeQueues.all.group_by { |job| job["class"] }

      def clear_all = JobQueue::Testing::FakeQueues.clear_all
    end
  end
end
