# frozen_string_literal: true

module JobQueue
  module Worker
    # GitLab-style deduplication, declared on a worker class (the engine does the work):
    #
    #   class AuthorizedProjectsWorker
    #     include JobQueue::Worker
    #     deduplicate :until_executed, if_deduplicated: :reschedule_once, ttl: 300
    #     idempotent!
    #   end
    #
    # A job pushed while an identical one (same class, same arguments, or same
    # `idempotency_arguments(args)` when the class defines it) holds the idempotency key is a
    # duplicate: dropped when the worker is `idempotent!`, else pushed with a `duplicate-of` mark.
    # Plain workers default to `:none` (no deduplication, no cost); `idempotent!` alone implies
    # `:until_executing`; a base class may override `default_deduplicate_strategy`.
    module Deduplication
      STRATEGIES = %i[until_executing until_executed none].freeze
      OPTIONS = %i[ttl including_scheduled if_deduplicated].freeze
      IF_DEDUPLICATED = %i[reschedule_once].freeze
      DEFAULT_TTL = 6 * 60 * 60

      # What the processor passes when a job carries an idempotency key but its class is unknown
      # or not deduplicated any more: release at start, default TTL, no reschedule.
      RELEASE_AT_START = [false, DEFAULT_TTL, false].freeze

      # Declares the worker safe to run several times with the same arguments: its duplicates are
      # dropped rather than marked.
      def idempotent!
        @idempotent = true
        Worker.options_changed!
      end

      def idempotent?
        return true if @idempotent

        superclass.respond_to?(:idempotent?) ? superclass.idempotent? : false
      end

      # `deduplicate :until_executing | :until_executed | :none, ttl:, including_scheduled:,
      # if_deduplicated: :reschedule_once` (the last only with `:until_executed`).
      def deduplicate(strategy, **options)
        unless STRATEGIES.include?(strategy)
          raise ArgumentError, "#{name}: unknown deduplication strategy #{strategy.inspect}; use #{STRATEGIES.map(&:inspect).join(", ")}"
        end

        @deduplicate_strategy = strategy
        @deduplication_options = Deduplication.check_options(self, strategy, options).freeze
        Worker.options_changed!
      end

      # The strategy used when none is declared: `:none` for plain workers (GitLab's
      # ApplicationWorker uses `:until_executing`). Overridable.
      def default_deduplicate_strategy
        :none
      end

      def get_deduplicate_strategy
        declared = declared_deduplication&.first
        return declared if declared
        return :until_executing if idempotent? && default_deduplicate_strategy == :none

        default_deduplicate_strategy
      end

      def get_deduplication_options
        declared_deduplication&.last || {}
      end

      # @api private: what the client passes to the engine — `[class_name, ttl, idempotent?,
      # reschedule_once?]` — or nil when the worker is not deduplicated. Cached until any worker's
      # options change.
      def deduplication_push_options
        generation = Worker.options_generation
        return @dedup_push if @dedup_push_generation == generation

        @dedup_push = build_deduplication_push_options
        @dedup_push_generation = generation
        @dedup_push
      end

      # @api private: whether jobs scheduled in the future are deduplicated too.
      def deduplicate_including_scheduled?
        get_deduplication_options.fetch(:including_scheduled, false)
      end

      # @api private: what the processor passes to the engine for a job carrying an idempotency
      # key: `[until_executed?, ttl, reschedule_once?]`.
      def deduplication_server_options
        generation = Worker.options_generation
        return @dedup_server if @dedup_server_generation == generation

        push = deduplication_push_options
        @dedup_server = push ? [get_deduplicate_strategy == :until_executed, push[1], push[3]].freeze : RELEASE_AT_START
        @dedup_server_generation = generation
        @dedup_server
      end

      # @api private
      def declared_deduplication
        return [@deduplicate_strategy, @deduplication_options] if @deduplicate_strategy

        superclass.respond_to?(:declared_deduplication) ? superclass.declared_deduplication : nil
      end

      def self.check_options(worker, strategy, options)
        unknown = options.keys - OPTIONS
        raise ArgumentError, "#{worker.name}: unknown deduplication option(s) #{unknown.map(&:inspect).join(", ")}; use #{OPTIONS.map(&:inspect).join(", ")}" if unknown.any?

        options = options.dup
        if options.key?(:ttl)
          ttl = options[:ttl]
          seconds = ttl.respond_to?(:to_i) ? ttl.to_i : nil
          raise ArgumentError, "#{worker.name}: deduplication ttl must be a positive number of seconds, got #{ttl.inspect}" unless seconds&.positive?

          options[:ttl] = seconds
        end
        if options.key?(:including_scheduled) && ![true, false].include?(options[:including_scheduled])
          raise ArgumentError, "#{worker.name}: including_scheduled must be true or false, got #{options[:including_scheduled].inspect}"
        end
        if options.key?(:if_deduplicated)
          value = options[:if_deduplicated]
          raise ArgumentError, "#{worker.name}: unknown if_deduplicated #{value.inspect}; use :reschedule_once" unless IF_DEDUPLICATED.include?(value)
          raise ArgumentError, "#{worker.name}: if_deduplicated: :reschedule_once needs the :until_executed strategy, not #{strategy.inspect}" unless strategy == :until_executed
        end
        options
      end

      private

      def build_deduplication_push_options
        return nil if get_deduplicate_strategy == :none

        options = get_deduplication_options
        [
          name,
          options.fetch(:ttl, DEFAULT_TTL),
          idempotent?,
          options[:if_deduplicated] == :reschedule_once
        ].freeze
      end
    end
  end
end
