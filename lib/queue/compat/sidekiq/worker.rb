# frozen_string_literal: true

module Sidekiq
  # `include Sidekiq::Worker` (or Sidekiq::Job) makes a JobQueue::Worker: the same class API
  # (sidekiq_options, perform_async/in/at, set, perform_bulk, perform_inline, sidekiq_retry_in,
  # sidekiq_retries_exhausted, logger, jid). Options queue does not honour raise ArgumentError.
  module Worker
    UNSUPPORTED_OPTIONS = {
      "pool" => "queue has one Redis per app (`config.redis`); sharding jobs over Redis pools is not available",
      "unique_for" => "Sidekiq Enterprise's unique jobs are GitLab-style deduplication here: `deduplicate :until_executed, ttl: N` and `idempotent!`",
      "unique_until" => "Sidekiq Enterprise's unique jobs are GitLab-style deduplication here: `deduplicate :until_executing` or `:until_executed`"
    }.freeze

    class << self
      def included(base)
        raise ArgumentError, "Sidekiq::Worker must be included in a class" unless base.is_a?(Class)

        base.include(JobQueue::Worker)
        base.extend(ClassMethods)
      end

      # Raises ArgumentError for an option queue does not honour, naming the replacement.
      def check_supported!(options, where)
        options.each_key do |key|
          instead = UNSUPPORTED_OPTIONS[key.to_s]
          raise ArgumentError, "#{where}: option #{key.inspect} is not supported by queue; #{instead}" if instead
        end
      end

      # Sidekiq::Testing's `Sidekiq::Worker.jobs`, `clear_all`, `drain_all` (after
      # `require "sidekiq/testing"`).
      def jobs = testing(:jobs)

      def clear_all = testing(:clear_all)

      def drain_all = testing(:drain_all)

      private

      def testing(name)
        raise NoMethodError, "Sidekiq::Worker.#{name} needs `require \"sidekiq/testing\"` first" unless JobQueue::Worker.respond_to?(name)

        JobQueue::Worker.public_send(name)
      end
    end

    # Checks Sidekiq's options before JobQueue::Worker's class methods take them.
    module ClassMethods
      def sidekiq_options(options = {})
        Sidekiq::Worker.check_supported!(options, "#{name}.sidekiq_options")
        super
      end

      def set(options)
        Sidekiq::Worker.check_supported!(options, "#{name}.set")
        super
      end

      # Sidekiq::Testing's `Worker.queue`: the queue this class pushes to.
      def queue
        get_sidekiq_options["queue"]
      end
    end
  end

  # Sidekiq 6.3+ calls workers jobs; both names are the same module.
  Job = Worker
end
